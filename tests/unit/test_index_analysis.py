"""The one tokenizer and the query parser."""

import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_index_tokens import regex_tokens

from politecrawl.index import tokenize
from politecrawl.index.analysis import MAX_QUERY_TERMS, MAX_TOKEN_LEN, Analyzer
from politecrawl.index.query import Query, parse_query


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("Hello, World!", ["hello", "world"]),
        ("Python 3.11 released", ["python", "3", "11", "released"]),
        ("python3", ["python3"]),
        ("sys.path", ["sys", "path"]),
        ("__init__", ["init"]),
        ("snake_case_name", ["snake", "case", "name"]),
        ("Straße", ["strasse"]),  # casefold, not lower
        ("ＰＹＴＨＯＮ", ["python"]),  # NFKC full-width
        ("ﬁle", ["file"]),  # NFKC ligature
        ("café naïve", ["café", "naïve"]),
        ("Ελληνικά Русский", ["ελληνικά", "русский"]),
        ("東京 2024", ["東京", "2024"]),
        ("parsing parsed parse", ["parsing", "parsed", "parse"]),  # no stemming
        ("the and of", ["the", "and", "of"]),  # no stop words by default
        ("", []),
        ("  \t\n--!!", []),
        ("x" * (MAX_TOKEN_LEN + 1) + " ok", ["ok"]),
        ("x" * MAX_TOKEN_LEN, ["x" * MAX_TOKEN_LEN]),
    ],
)
def test_tokenize_table(text, tokens):
    assert tokenize(text) == tokens


def test_stop_words_optional():
    a = Analyzer(stop_words=True)
    assert a.tokenize("The cat and the hat") == ["cat", "hat"]
    assert Analyzer.from_json(a.to_json()) == a


@pytest.mark.parametrize(
    "q, expected",
    [
        ("python tutorial", Query(terms=["python", "tutorial"])),
        ('"hard way" python', Query(terms=["python"], phrases=[["hard", "way"]])),
        ('"unclosed phrase here', Query(phrases=[["unclosed", "phrase", "here"]])),
        ('"single"', Query(terms=["single"], exact=("single",))),  # a quoted word: that form only
        ("python -snake", Query(terms=["python"], excluded=["snake"])),
        ("site:Example.COM python", Query(terms=["python"], site="example.com")),
        ("site:https://www.example.com/path x", Query(terms=["x"], site="example.com")),
        ("python python PYTHON", Query(terms=["python"])),
        ("-", Query(terms=[])),
        ("site:", Query(terms=["site"])),
        ("", Query()),
        ("!!! ???", Query()),
    ],
)
def test_parse_query_table(q, expected):
    assert parse_query(q) == expected


def test_parse_query_control_characters_stripped():
    assert parse_query("py\x00thon\x1b[31m\u200bsnake").terms == ["py", "thon", "31m", "snake"]


def test_parse_query_caps_terms():
    q = parse_query(" ".join(f"w{i}" for i in range(10_000)))
    assert len(q.terms) == MAX_QUERY_TERMS
    assert q.terms[0] == "w0"


def test_parse_query_long_input():
    q = parse_query("a" * 10_000)
    assert q.terms == []  # one 4096-char token: longer than MAX_TOKEN_LEN
    q = parse_query("ab " * 10_000)
    assert q.terms == ["ab"]


def test_parse_query_non_string():
    assert parse_query(None) == Query()  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
@example("\u1fd2")  # casefolds to three code points, which NFKC composes back: a term as it is
@example("Straße")  # the control: casefold changes it, and the term is the casefolded "strasse"
def test_parse_query_never_raises(q):
    parsed = parse_query(q)
    total = len(parsed.terms) + sum(map(len, parsed.phrases)) + len(parsed.excluded)
    assert total <= MAX_QUERY_TERMS
    for t in parsed.terms + parsed.excluded:
        # casefolded, then NFKC again (the analyzer's NFKC_Casefold closure), so a term is what
        # the analyzer makes of it: not always t.casefold(), which leaves U+1FD2 decomposed
        assert t and tokenize(t) == [t]


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(), min_size=0, max_size=2000))
def test_tokenize_is_idempotent(text):
    toks = tokenize(text)
    assert tokenize(" ".join(toks)) == toks


def _regex_tokenize(text):
    """The reference definition (``test_index_tokens.regex_tokens``): regexes over the
    NFKC_Casefold'ed text, CJK runs cut into bigrams."""
    return regex_tokens(text)


_TRICKY = list("aZ9_ \t\n.-'’“—é\u0301\u0345ßİ\ufb01ｆ①½™\u00a0\u2028\u200b\U0001d400東京の") + ["\ud800", "x" * 70]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.characters(), st.sampled_from(_TRICKY)), max_size=200).map("".join))
def test_fast_tokenizer_equals_regex_definition(text):
    assert tokenize(text) == _regex_tokenize(text)


def test_fast_tokenizer_equals_regex_on_every_code_point():
    chars = "".join(chr(i) for i in range(0x110000) if not 0xD800 <= i < 0xE000)
    for i in range(0, len(chars), 4096):
        chunk = chars[i : i + 4096]
        assert tokenize(chunk) == _regex_tokenize(chunk)
        assert tokenize(" ".join(chunk)) == _regex_tokenize(" ".join(chunk))


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(list("ab Ü1-_.:'\t") + ["site", "ﬁ", "\u0301", "\u3000", "ß"]), max_size=40).map("".join)
)
def test_plain_word_queries_parse_as_word_by_word(text):
    """The fast path for queries of plain words gives what the word-by-word parser gives."""
    from politecrawl.index.query import _OPERATORS, _clean, _parse, _parse_parts

    q = _clean(text)
    if _OPERATORS.search(q):
        return
    for analyzer in (Analyzer(), Analyzer(stop_words=True)):
        assert _parse(q, analyzer) == _parse_parts(q, analyzer)


#: Plain words and valid filters: the fast path's queries; and words that leave a query to the
#: word-by-word parser (a phrase, a -word, OR, CJK, a filter of an invalid value, a colon).
_FAST_WORDS = "a Üb ﬁ or site:WWW.a.example lang:en LANG:de_AT filetype:.PDF type:htm after:2021 before:2024-3"
_OTHER_WORDS = '東京 -x "q OR site: lang:!! after:2021-02-30 x:y c++: : -'


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_FAST_WORDS.split() + ["\u3000"]), min_size=1, max_size=30),
    st.lists(st.sampled_from(_OTHER_WORDS.split()), max_size=3),
)
def test_words_and_filters_parse_as_word_by_word(fast, other):
    """The fast path for plain words and filters gives what the word-by-word parser gives,
    whatever else the query holds (it leaves phrases, -words, OR, CJK and invalid filters to it),
    and takes every query of plain words and valid filters within the terms' budget."""
    from politecrawl.index.query import _clean, _parse, _parse_filtered_words, _parse_parts

    words = fast + other
    random.Random(len(words)).shuffle(words)
    q = _clean(" ".join(words))
    for analyzer in (Analyzer(), Analyzer(stop_words=True)):
        assert _parse(q, analyzer) == _parse_parts(q, analyzer)
    if not other and ":" in q:
        assert _parse_filtered_words(q, Analyzer()) is not None
