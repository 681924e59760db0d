"""A query: what a search asks for (``Query``), and ``parse_query``, which reads it from what a
person types, with the tokenizer of ``analysis``.

Free words are OR-ed and ranked; ``"a phrase"`` must occur as written (a quoted word: that form
only); ``-word`` leaves out the pages that hold it; ``a OR b`` is what a space already is; the
filters ``site:``, ``filetype:``/``type:``, ``lang:``, ``after:`` and ``before:`` narrow the pages
that may match. ``parse_query`` never raises.
"""

from __future__ import annotations

import datetime
import re
import unicodedata
from dataclasses import dataclass, field

from .analysis import _STRIP_CATEGORIES, DEFAULT_ANALYZER, MAX_QUERY_TERMS, Analyzer, Term

__all__ = ["Query", "parse_query"]

# A query longer than this is cut before analysis (bound what a user controls).
_MAX_QUERY_CHARS = 4096


@dataclass(frozen=True)
class Query:
    """A parsed query.

    ``terms``: free-text terms, OR-ed and ranked by BM25.
    ``exact``: those of ``terms`` given in quotes alone (``"parsing"``): their other forms
    (stemming) do not count.
    ``phrases``: each a list of tokens that must appear consecutively in one
    field; every phrase must match, and phrase tokens also count for ranking.
    ``excluded``: a document containing any of these tokens is dropped.
    ``site``: lower-cased host; matches that host and its subdomains.
    ``types``: document kinds (``filetype:``/``type:``: "html", "pdf", …); any of them matches.
    ``langs``: primary language subtags (``lang:``: "en", "de", …); any of them matches.
    ``after``/``before``: ISO dates ("YYYY-MM-DD"); a document dated on or after ``after`` and
    strictly before ``before`` matches (its Last-Modified date, else the day it was fetched).
    """

    terms: list[str] = field(default_factory=list)
    phrases: list[list[str]] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    site: str | None = None
    types: tuple[str, ...] = ()
    langs: tuple[str, ...] = ()
    after: str | None = None
    before: str | None = None
    #: the stemmed terms that also score (``stemming.query_stems``; the searcher adds them), and
    #: the query word each stems
    stems: tuple[Term, ...] = ()
    stem_of: tuple[str, ...] = ()
    exact: tuple[str, ...] = ()

    @property
    def has_filters(self) -> bool:
        """Whether a filter other than ``site:`` narrows the documents (type, language, date)."""
        return bool(self.types or self.langs or self.after or self.before)

    @property
    def positive_terms(self) -> list[str]:
        """Distinct scoring terms (free terms, then phrase terms), in order."""
        seen: dict[str, None] = {}
        for t in self.terms:
            seen.setdefault(t, None)
        for p in self.phrases:
            for t in p:
                seen.setdefault(t, None)
        return list(seen)

    @property
    def scored_terms(self) -> list[Term]:
        """Every term that scores: ``positive_terms``, then the stem groups."""
        terms: list[Term] = list(self.positive_terms)
        return terms + list(self.stems)

    @property
    def proximity_terms(self) -> list[Term]:
        """Per term of ``positive_terms``, the term whose positions term proximity reads: the
        word's stem group where it has one (its forms: "read a file" is close in "reading the
        files"), else the word itself."""
        if not self.stems:
            return list(self.positive_terms)
        group: dict[str, Term] = {}
        for g, word in zip(self.stems, self.stem_of):
            group.setdefault(word, g)
        return [group.get(t, t) for t in self.positive_terms]

    @property
    def is_empty(self) -> bool:
        return not self.terms and not any(self.phrases)


#: ASCII control characters (whitespace included) -> space: what ``_clean`` does to ASCII text.
_ASCII_CONTROLS = {c: " " for c in [*range(0x20), 0x7F]}


def _clean(q: str) -> str:
    q = q[:_MAX_QUERY_CHARS]
    if q.isascii():  # the per-character loop below costs ~20 us on a short query
        return q.translate(_ASCII_CONTROLS)
    out = []
    for ch in q:
        if ch.isspace():
            out.append(" ")
        elif unicodedata.category(ch) in _STRIP_CATEGORIES:
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


# A quoted phrase (an unclosed quote runs to the end) or a run of non-space.
_QUERY_PART_RE = re.compile(r'"([^"]*)"?|(\S+)')
_SITE_RE = re.compile(r"^(?:https?://)?([^/:?#\s]+)")


def _parse_site(value: str) -> str | None:
    m = _SITE_RE.match(value.strip().lower())
    if not m:
        return None
    host = m.group(1).strip(".")
    if host.startswith("www."):
        host = host[4:]
    return host or None


_KIND_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,31}$")
_LANG_RE = re.compile(r"^[a-z]{2,8}$")
_DATE_RE = re.compile(r"^(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?$")
#: ``filetype:`` aliases to the kind the index stores (``doc_kind``).
_KIND_ALIASES = {"htm": "html", "xhtml": "html", "text": "txt", "plain": "txt"}


def _parse_kind(value: str) -> str | None:
    kind = value.strip().lower().lstrip(".")
    kind = _KIND_ALIASES.get(kind, kind)
    return kind if _KIND_RE.match(kind) else None


def _parse_lang(value: str) -> str | None:
    lang = value.strip().lower().replace("_", "-").split("-", 1)[0]
    return lang if _LANG_RE.match(lang) else None


def _parse_date(value: str) -> str | None:
    """``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD`` as the first day they name ("YYYY-MM-DD"):
    ``after:2024`` is on or after 2024-01-01, ``before:2024`` strictly before it."""
    m = _DATE_RE.match(value.strip())
    if not m:
        return None
    year, month, day = int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)
    try:
        date = datetime.date(year, month, day)
    except ValueError:
        return None
    return date.isoformat()


#: ``filetype:`` and ``type:`` are one filter.
_FILTER_KEY = {"filetype": "type"}
_FILTER_VALUE = {
    "site": _parse_site,
    "filetype": _parse_kind,
    "type": _parse_kind,
    "lang": _parse_lang,
    "after": _parse_date,
    "before": _parse_date,
}


def _take_filter(word: str, found: dict[str, list[str]]) -> bool:
    """Whether ``word`` is a filter of a valid value (``lang:en``): then its value is added to
    ``found`` under the filter's name (``filetype:`` under ``type``)."""
    name, colon, value = word.partition(":")
    name = name.lower()
    parse = _FILTER_VALUE.get(name) if colon and value else None
    parsed = parse(value) if parse is not None else None
    if parsed is None:
        return False
    found.setdefault(_FILTER_KEY.get(name, name), []).append(parsed)
    return True


def _filtered(
    found: dict[str, list[str]],
    terms: list[str],
    exact: tuple[str, ...] = (),
    phrases: list[list[str]] | None = None,
    excluded: list[str] | None = None,
) -> Query:
    """The query of these terms, phrases and exclusions with the filters ``found``: ``site:``,
    ``after:`` and ``before:`` keep the last given, ``type:`` and ``lang:`` any of theirs."""
    return Query(
        terms=terms,
        exact=exact,
        phrases=phrases or [],
        excluded=excluded or [],
        site=found["site"][-1] if "site" in found else None,
        types=tuple(dict.fromkeys(found.get("type", []))),
        langs=tuple(dict.fromkeys(found.get("lang", []))),
        after=found["after"][-1] if "after" in found else None,
        before=found["before"][-1] if "before" in found else None,
    )


def parse_query(q: str, analyzer: Analyzer = DEFAULT_ANALYZER) -> Query:
    """Parse free text, ``"exact phrases"`` (a quoted word: that form only), ``-excluded`` terms,
    ``a OR b`` and the filters ``site:host``, ``filetype:``/``type:kind``, ``lang:xx``,
    ``after:date``, ``before:date``.

    ``OR`` (upper case, between words) is what a space already is: free terms are OR-ed and
    ranked; it is not a word. A filter given twice (``lang:en lang:de``) keeps either value, but
    ``site:``, ``after:`` and ``before:`` keep the last. A filter whose value is not valid
    (``lang:!!``, ``after:yesterday``) is read as words.

    An unquoted word's run of CJK letters is the phrase of its bigrams (``_word_terms``); a
    ``-word``'s CJK bigrams are each excluded.

    Never raises: non-string input is treated as empty, control characters are
    replaced by spaces, input beyond 4096 characters is ignored, and at most
    ``MAX_QUERY_TERMS`` tokens are kept (counting terms, phrase tokens and
    excluded tokens together, in the order they appear).
    """
    if not isinstance(q, str):
        return Query()
    try:
        return _parse(_clean(q), analyzer)
    except Exception:  # pragma: no cover - belt and braces: never raise
        return Query()


#: Characters that make a query more than plain words: a phrase, an exclusion, a filter, OR.
_OPERATORS = re.compile(r'["]|(?:^|\s)-\S|(?:site|filetype|type|lang|after|before):|\bOR\b', re.IGNORECASE)


def _parse(q: str, analyzer: Analyzer) -> Query:
    if not _OPERATORS.search(q) and not analyzer.has_cjk(q):
        # Plain words (most queries): the words' tokens are the whole query's tokens, which one
        # call finds; the per-word loop costs a tokenizer call per word.
        return Query(terms=list(dict.fromkeys(analyzer.tokenize(q)[:MAX_QUERY_TERMS])))
    return _parse_filtered_words(q, analyzer) or _parse_parts(q, analyzer)


def _parse_filtered_words(q: str, analyzer: Analyzer) -> Query | None:
    """Plain words and valid filters (``open file lang:en after:2021``, what the web page's
    facets make): the filters taken out, the words in one tokenizer call, as ``_parse_parts``
    reads them; None for any other query (a filter of an invalid value is a word there)."""
    words: list[str] = []
    found: dict[str, list[str]] = {}
    for word in q.split():
        if ":" not in word:
            if word[0] in '-"' or word == "OR" or '"' in word:
                return None
            words.append(word)
        elif not _take_filter(word, found):
            return None
    text = " ".join(words)
    if analyzer.has_cjk(text):
        return None
    toks = analyzer.tokenize(text)
    if len(toks) >= MAX_QUERY_TERMS:  # the word-by-word parser drops what follows the budget
        return None
    return _filtered(found, terms=list(dict.fromkeys(toks)))


def _word_terms(word: str, analyzer: Analyzer, budget: int, terms: list[str], phrases: list[list[str]]) -> int:
    """The tokens of an unquoted query word, at most ``budget``: added to ``terms``, but the
    bigrams of a CJK run of three or more letters as one phrase (the run's words are found where
    its bigrams follow each other, not wherever one of them occurs). Returns the tokens used."""
    used = 0
    for group in analyzer.token_groups(word):
        group = group[: budget - used]
        used += len(group)
        if len(group) > 1:
            phrases.append(group)
        else:
            terms.extend(group)
        if used >= budget:
            break
    return used


def _parse_parts(q: str, analyzer: Analyzer) -> Query:
    """``_parse`` word by word: phrases, exclusions and ``site:`` as they come."""
    terms: list[str] = []
    exact: list[str] = []
    phrases: list[list[str]] = []
    excluded: list[str] = []
    found: dict[str, list[str]] = {}  # the filters
    budget = MAX_QUERY_TERMS
    # Plain words wait here and are analysed together (one tokenizer call, the same tokens as
    # word by word: words are split on spaces anyway) when a phrase or -word comes, or at the end.
    pending: list[str] = []

    def flush() -> None:
        nonlocal budget
        if pending:
            toks = analyzer.tokenize(" ".join(pending))[:budget]
            budget -= len(toks)
            terms.extend(toks)
            pending.clear()

    for m in _QUERY_PART_RE.finditer(q):
        if budget <= 0:
            break
        phrase, word = m.group(1), m.group(2)
        if phrase is not None or word.startswith("-"):
            flush()
            if budget <= 0:
                break
        if phrase is not None:
            toks = analyzer.tokenize(phrase)[:budget]
            budget -= len(toks)
            if len(toks) == 1:  # a quoted word: this form only
                terms.append(toks[0])
                exact.append(toks[0])
            elif toks:
                phrases.append(toks)
            continue
        if word == "OR":
            continue  # OR between words: what a space is (free terms are OR-ed)
        if ":" in word and _take_filter(word, found):
            continue
        if word.startswith("-") and len(word) > 1:
            toks = analyzer.tokenize(word[1:])[:budget]
            budget -= len(toks)
            excluded.extend(toks)
            continue
        if analyzer.has_cjk(word):  # its bigrams may be a phrase: on its own (_word_terms)
            flush()
            budget -= _word_terms(word, analyzer, budget, terms, phrases)
            continue
        pending.append(word)
    flush()

    return _filtered(  # each term once, in order
        found,
        terms=list(dict.fromkeys(terms)),
        exact=tuple(dict.fromkeys(exact)),
        phrases=phrases,
        excluded=list(dict.fromkeys(excluded)),
    )
