"""The compiled word splitting (``_kernels.tokens`` and ``_kernels.Vocabulary``) against the
analyser's Python code and the regex that defines it.

The tokens decide every search result, so the compiled path must give exactly the Python
path's tokens, and the Python path the regex definition's (``[^\\W_]+`` runs of the NFKC_Casefold
text, at most ``MAX_TOKEN_LEN`` characters): on a corpus of the text a crawl meets (accents,
CJK, scripts without case, digits of other scripts, punctuation, URLs, code identifiers, very
long words, empty text), on every code point, and on random text. The writer's vocabulary must
hand out the same ids in the same order both ways, and a segment written with it must be the
same bytes. A negative control shows the comparison can fail.
"""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_index_kernels import numpy_only  # the compiled kernels off: the Python code runs

from politecrawl.index import IndexWriter, kernels
from politecrawl.index.analysis import (
    CJK_RANGES,
    ENGLISH_STOP_WORDS,
    MAX_TOKEN_LEN,
    Analyzer,
    Vocabulary,
    _normalize,
    is_cjk,
)
from politecrawl.index.query import parse_query

compiled = kernels.compiled
needs_kernels = pytest.mark.skipif(compiled is None, reason="the compiled kernels are not built (no C compiler)")

CORPUS = [
    "",
    " ",
    "\t\n\r\x0b\x0c",
    "Hello, World! The quick brown fox jumps over the lazy dog.",
    "Café crème brûlée, naïve coöperation, façade, jalapeño, Ångström, Øresund",
    "Straße STRASSE ß ẞ İstanbul ıi Σίσυφος ΣΊΣΥΦΟΣ ος",
    "e\u0301 a\u0300 o\u0308 (combining marks) \u0345 \u0399\u0345",
    "ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３ ﬁle ﬂow ﬀ ½ ² ③ Ⅻ ㎏ ™ ℌ",
    "中文分词测试，日本語のテキスト。한국어 텍스트! 東京タワー",
    "العربية ١٢٣ עברית हिन्दी ४२ ไทย ภาษา",
    "price: $1,234.56 (-7%) 3.14159 1e10 0x1F 2026-12-03 12:30:45 +33 1 23 45 67 89",
    "https://example.com/path/to/page?q=search+term&lang=en#section-2 mailto:someone@example.org",
    "sys.path __init__ snake_case_name camelCaseName kebab-case-name Foo::bar->baz() a[i]+=b[j];",
    "don't can't it’s “quoted” «guillemets» —dash– ‘single’ ellipsis… bullet•point",
    "zero\u200bwidth\u200cjoin\u200dhere bidi\u202eoverride\u202c soft\u00adhyphen nb\u00a0sp ogham\u1680space",
    "emoji 😀🎉 flags 🇫🇷 keycap 1️⃣ family 👨‍👩‍👧 math 𝐀𝐁𝐂 𝟏𝟐𝟑",
    "control\x00chars\x01\x1f\x7f\x80\x9f here",
    "lone \ud800 surrogate \udfff pair",
    "x" * MAX_TOKEN_LEN + " " + "y" * (MAX_TOKEN_LEN + 1) + " " + "é" * MAX_TOKEN_LEN + " " + "é" * (MAX_TOKEN_LEN + 1),
    "ﬁ" * 40 + " " + "①" * 33 + " " + "中" * 65 + " " + "a\u0301" * 40,
    "the and of a an to in is it THE AND Of",
    "line1\nline2\r\nline3\u2028line4\u2029line5\x85line6",
    "A" * 10_000,
    " ".join(f"w{i}" for i in range(500)),
]


#: The CJK code points (``CJK_RANGES``) as a regex class, written here from the table alone.
_CJK = "".join(f"{chr(a)}-{chr(b)}" for a, b in CJK_RANGES)


def regex_tokens(text: str, stop_words: bool = False) -> list[str]:
    """The definition: the ``[^\\W_]+`` runs of the NFKC_Casefold'ed text, each cut into its CJK
    and other pieces; a CJK piece gives its overlapping bigrams (itself if one character), another
    piece itself if short enough (and not a stop word)."""
    n = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    out: list[str] = []
    for run in re.findall(r"[^\W_]+", n):
        for piece in re.findall(f"[{_CJK}]+|[^{_CJK}]+", run):
            if re.match(f"[{_CJK}]", piece):
                out.extend([piece] if len(piece) == 1 else [piece[i : i + 2] for i in range(len(piece) - 1)])
            elif len(piece) <= MAX_TOKEN_LEN and not (stop_words and piece in ENGLISH_STOP_WORDS):
                out.append(piece)
    return out


def v1_tokens(text: str) -> list[str]:
    """The definition before CJK bigrams (analyzer "politecrawl-v1"): every run whole."""
    n = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return [t for t in re.findall(r"[^\W_]+", n) if len(t) <= MAX_TOKEN_LEN]


def all_ways(text: str, stop_words: bool = False) -> dict[str, list[str]]:
    """The tokens of ``text`` every way there is: the regex, the Python code, the compiled
    ``tokens``, and through each vocabulary (ids mapped back to their terms)."""
    a = Analyzer(stop_words=stop_words)
    out = {"regex": regex_tokens(text, stop_words), "python": a.tokenize_python(text)}
    with numpy_only():
        out["tokenize without kernels"] = a.tokenize(text)
        vocab = a.vocabulary()
        assert isinstance(vocab, Vocabulary)
        ids = _ids(a.term_ids(text, vocab))
        terms = vocab.terms()
        out["python vocabulary"] = [terms[i] for i in ids]
    if compiled is not None:
        out["compiled tokens"] = a.tokenize(text)
        cvocab = a.vocabulary()
        assert not isinstance(cvocab, Vocabulary)
        ids = _ids(a.term_ids(text, cvocab))
        terms = cvocab.terms()
        out["compiled vocabulary"] = [terms[i] for i in ids]
    return out


def _ids(raw: bytes) -> list[int]:
    import array

    ids = array.array("i")
    ids.frombytes(raw)
    return ids.tolist()


def assert_all_equal(text: str, stop_words: bool = False) -> None:
    ways = all_ways(text, stop_words)
    reference = ways["regex"]
    for name, tokens in ways.items():
        assert tokens == reference, f"{name} differs from the regex on {text[:80]!r}"


@pytest.mark.parametrize("stop_words", [False, True])
@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_every_way_gives_the_same_tokens_on_the_corpus(text, stop_words):
    assert_all_equal(text, stop_words)


def test_the_corpus_together_and_through_one_vocabulary():
    """One vocabulary across many texts, as a segment's: the same ids both ways, in the order of
    first appearance, and the same terms."""
    a = Analyzer()
    texts = CORPUS * 2 + [" ".join(CORPUS)]
    with numpy_only():
        pv = a.vocabulary()
        p_ids = [_ids(a.term_ids(t, pv)) for t in texts]
    if compiled is None:
        pytest.skip("the compiled kernels are not built")
    cv = a.vocabulary()
    c_ids = [_ids(a.term_ids(t, cv)) for t in texts]
    assert c_ids == p_ids
    assert cv.terms() == pv.terms() and len(cv) == len(pv)
    assert sorted(set(i for ids in p_ids for i in ids)) == list(range(len(pv)))


#: Planes 0-3 (every script, the CJK extensions) and 14 (tags, variation selectors) whole; of
#: planes 4-13 (unassigned) and 15-16 (private use), whose code points are each of one category,
#: every 61st.
_PLANES_WHOLE = [*range(0x40000), *range(0xE0000, 0xF0000)]
_PLANES_SAMPLED = [*range(0x40000, 0xE0000, 61), *range(0xF0000, 0x110000, 61)]


def test_every_code_point_alone_and_between_letters():
    """Each code point (surrogates included) of the planes that hold more than one category, and
    a sample of the others, as a word of its own and inside one."""
    points = [chr(i) for i in _PLANES_WHOLE + _PLANES_SAMPLED]
    for i in range(0, len(points), 8192):
        chunk = points[i : i + 8192]
        # "a{c}b": one token where c is a letter or digit not CJK, three where it is CJK
        for text in (" ".join(chunk), " ".join(f"a{c}b" for c in chunk)):
            assert_all_equal(text)


_ALPHABET = list("aZ9_ \t\n.-'’“—é\u0301\u0345ßİ\ufb01ｆ①½™\u00a0\u2028\u200b\U0001d400中あ한١")
_ALPHABET += list("東京ｶー々〇ᄀ⽇㍿\U00020000") + ["\ud800", "x" * 70]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.characters(), st.sampled_from(_ALPHABET)), max_size=300).map("".join), st.booleans())
def test_random_text(text, stop_words):
    assert_all_equal(text, stop_words)


@needs_kernels
def test_negative_control_the_comparison_can_fail():
    """The comparison catches a splitter that is off by one character of length, by the
    underscore, or by case: each of these mutants differs from the regex on the corpus."""
    assert compiled is not None
    texts = CORPUS
    off_by_one = [compiled.tokens(_normalize(t), MAX_TOKEN_LEN + 1) for t in texts]
    assert off_by_one != [regex_tokens(t) for t in texts]
    underscore = [re.findall(r"\w+", _normalize(t)) for t in texts]
    assert underscore != [regex_tokens(t) for t in texts]
    no_casefold = [compiled.tokens(t, MAX_TOKEN_LEN) for t in texts]
    assert no_casefold != [regex_tokens(t) for t in texts]


@needs_kernels
def test_a_segment_written_with_either_vocabulary_is_the_same_bytes(tmp_path: Path):
    rng = random.Random(3)
    words = [w for t in CORPUS for w in t.split()] + [f"w{i}" for i in range(300)]
    docs = [
        (
            f"https://example.org/{i}",
            " ".join(rng.choices(words, k=rng.randint(0, 8))),
            " ".join(rng.choices(words, k=rng.randint(0, 900))),
            " ".join(rng.choices(words, k=rng.randint(0, 5))),
        )
        for i in range(120)
    ]
    for stop_words in (False, True):
        dirs = []
        for name, use_python in (("compiled", False), ("python", True)):
            path = tmp_path / f"{name}-{stop_words}"
            if use_python:
                with numpy_only(), IndexWriter(path, stop_words=stop_words) as w:
                    for d in docs:
                        w.add_document(*d)
            else:
                with IndexWriter(path, stop_words=stop_words) as w:
                    for d in docs:
                        w.add_document(*d)
            [seg] = [p for p in path.iterdir() if p.name.startswith("seg-")]
            dirs.append(seg)
        a, b = dirs
        names = sorted(p.name for p in a.iterdir())
        assert names == sorted(p.name for p in b.iterdir())
        for n in names:
            assert (a / n).read_bytes() == (b / n).read_bytes(), n


@needs_kernels
@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("abz09éßİ中한\U0001d400 ")), max_size=12), max_size=60))
def test_both_vocabularies_sort_their_terms_alike(texts):
    """``sorted_terms``: the compiled one sorts by the first 8 bytes, then the rest; the Python
    one with ``sorted()``. Words sharing 8 bytes and prefixes of each other included."""
    texts = texts + [t * 3 for t in texts]
    a = Analyzer()
    with numpy_only():
        pv = a.vocabulary()
        for t in texts:
            a.term_ids(t, pv)
    cv = a.vocabulary()
    for t in texts:
        a.term_ids(t, cv)
    assert cv.sorted_terms() == pv.sorted_terms()


@needs_kernels
def test_both_vocabularies_sort_many_terms_alike():
    """Thousands of terms: one letter in front of all (a byte the radix sort skips), lengths of
    1 to 20 bytes, many sharing their first 8 bytes, in scripts of 1 to 4 bytes a character."""
    import random

    rng = random.Random(3)
    alphabet = list("abcxyz0189éßİกა\U0001d400")  # Thai, Georgian: 3 bytes, not CJK (no bigrams)
    words = ["w" + "".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(6000)]
    words += ["wprefixed" + "".join(rng.choices("abก", k=rng.randint(0, 4))) for _ in range(300)]
    text = " ".join(words)
    a = Analyzer()
    with numpy_only():
        pv = a.vocabulary()
        a.term_ids(text, pv)
    cv = a.vocabulary()
    a.term_ids(text, cv)
    assert len(cv) > 5000
    assert cv.sorted_terms() == pv.sorted_terms()


#: Every ASCII character, and words of lengths around the 8 bytes the compiled vocabulary reads
#: at once (1, 7, 8, 9, 15, 16) and around the longest token (64, 65), upper and lower case.
_ASCII_PIECES = [chr(c) for c in range(128)] + [
    w for n in (1, 7, 8, 9, 15, 16, 64, 65) for w in ("a" * n, "Zq9" * (n // 3) + "x" * (n % 3), "THE"[: min(n, 3)])
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_ASCII_PIECES), max_size=120).map("".join), st.booleans())
def test_random_ascii_text(text, stop_words):
    """ASCII text, which the compiled vocabulary reads 8 bytes at a time where it can: the same
    tokens and ids as the regex and the Python code, at every offset from the text's end."""
    assert_all_equal(text, stop_words)
    assert_all_equal(text + "the end", stop_words)


# -- CJK: runs cut into bigrams ---------------------------------------------------------------


def test_a_cjk_run_is_its_overlapping_bigrams_and_was_one_token_before():
    """Every way (regex, Python, compiled, both vocabularies) gives the bigrams; the definition
    before them (v1) made the sentence one token, which no query word could match."""
    text = "東京は日本の首都です"
    want = ["東京", "京は", "は日", "日本", "本の", "の首", "首都", "都で", "です"]
    for name, tokens in all_ways(text).items():
        assert tokens == want, name
    assert v1_tokens(text) == [text]  # negative control: the old analysis, one token
    assert v1_tokens("首都です") == ["首都です"] and "首都です" not in v1_tokens(text)


@pytest.mark.parametrize(
    "text, want",
    [
        ("python3で書いた", ["python3", "で書", "書い", "いた"]),  # cut where CJK and Latin meet
        ("3月の", ["3", "月の"]),
        ("東", ["東"]),  # a run of one: a token of one
        ("ｶﾀｶﾅ", ["カタ", "タカ", "カナ"]),  # half-width katakana: NFKC first
        ("한국어 텍스트", ["한국", "국어", "텍스", "스트"]),
        ("中文，分词", ["中文", "分词"]),  # punctuation ends a run
        ("x" * 65 + "中文", ["中文"]),  # a long Latin piece is dropped, the CJK piece is not
        ("中" * 70, ["中中"] * 69),  # a long CJK run is bigrams, never dropped
    ],
)
def test_cjk_pieces(text, want):
    for name, tokens in all_ways(text).items():
        assert tokens == want, name


def test_bigrams_at_the_edges_of_every_cjk_range():
    """The code points at and around each range's ends, between CJK letters: bigrams where they
    are CJK, a cut where they are not, the same every way."""
    edges = sorted({c + d for a, b in CJK_RANGES for c in (a, b) for d in (-1, 0, 1)})
    assert_all_equal(" ".join(f"{chr(c)}中{chr(c)}文{chr(c)}{chr(c)}" for c in edges if not 0xD800 <= c < 0xE000))


def test_the_cjk_table_is_the_scripts_written_without_spaces():
    for ch in "東京はカタカナ々〇한글ㄱ中\U00020000":
        assert is_cjk(ch), ch
    for ch in "aé1٣ßΣж\u0e01\u3000、。・゙":  # Latin, Arabic digit, Greek, Cyrillic, Thai, CJK punctuation
        assert not is_cjk(ch) or not ch.isalnum(), ch


def test_a_cjk_query_run_is_the_phrase_of_its_bigrams():
    q = parse_query("首都です python")
    assert q.phrases == [["首都", "都で", "です"]] and q.terms == ["python"]
    assert parse_query("東京").terms == ["東京"] and not parse_query("東京").phrases  # one bigram: a term
    q = parse_query('"日本の首都" -京都 site:example.jp')
    assert q.phrases == [["日本", "本の", "の首", "首都"]] and q.excluded == ["京都"] and q.site == "example.jp"
    # an English query is parsed as before: plain terms, OR-ed
    assert parse_query("parsing files").terms == ["parsing", "files"] and not parse_query("parsing files").phrases
