"""The stemmed field: Snowball stems (PyStemmer) of each page's words, in its own language, beside
the exact words.

The exact terms stay what they were (``analysis``): a page is found by the words it holds, and
phrases and exclusions work on them alone. Beside them, a page in a language a Snowball stemmer
covers (``STEMMERS``: the page's ``lang`` as the index stores it, declared by ``<html lang>`` or
Content-Language, else detected by the indexer) gets a term ``!<lang>:<stem>`` at the position of
each of its words, in the field it is in, whose stem has at least one form other than itself
among the segment's pages of that language (``segment_stems``): "parse", "parser" and "parsing"
of an English page are also ``!en:pars`` where they stand. A stem whose only form is itself gets
none (its exact term holds the same postings): a corpus of words no stemmer changes (numbers,
identifiers, the benchmarks' ``w123``) gets no stemmed terms at all, and its queries cost nothing
more.

A query word ``q`` of stem ``s`` is, in each language of the index, the **stem group**
``("!<lang>:s", "s")`` (``query_stems``): a segment scores the first of the two it holds
(``Segment.term_id``, and the kernels' ``term_ids``), so where no page of the segment has another
form of the word, the group is the word ``s`` itself (``s`` only where it is a word of its own
stem: ``parsing``'s group is ``!en:pars`` alone, "pars" being "par"'s). A group is scored as a
term with ``STEM_WEIGHT`` times its BM25F weights (``engine.Scorer.term_weights``): the score is
the exact BM25F plus ``STEM_WEIGHT`` times the BM25F of all the forms, saturated once, so a page
that holds the words typed ranks above one that holds only other forms of them. Term proximity
reads a word's group (``Query.proximity_terms``), and snippets the forms of it the index holds
(``suggest.stem_forms``).

The ``!`` sorts before every letter and digit, so a segment's stemmed terms are the first of its
dictionary, and no word a tokenizer makes (letters and digits) can be one: "did you mean" and
completion, which read words beginning with a letter or digit, never see them.

Stemming is a language's own: a German page's words are stemmed by the German stemmer into
``!de:…`` terms, which an English stem of a query word never meets. A query is stemmed in each
language the index holds stemmed pages of (``IndexReader.stem_langs``), or in those of its
``lang:`` filter.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np
import Stemmer

from .analysis import Term

__all__ = [
    "STEMMERS",
    "STEM_PREFIX",
    "STEM_WEIGHT",
    "query_stems",
    "segment_stems",
    "stem_lang",
    "stem_of",
    "stem_words",
    "stemmed_term",
]

#: What starts a stemmed term: below every letter and digit, so never a token, and the stemmed
#: terms sort first in a segment's dictionary.
STEM_PREFIX = "!"

#: The weight of the stemmed terms against the exact ones (< 1: exact matches first). Measured
#: on the hand-judged python3-doc queries (``benchmarks/bench_search_relevance.py``, docs/search.md).
STEM_WEIGHT = 0.3

#: ISO 639-1 primary language subtag -> (the namespace its stemmed terms are in, the Snowball
#: algorithm). Norwegian's three tags share one stemmer and one namespace.
_LANGUAGES = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "eo": "esperanto",
    "et": "estonian",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hi": "hindi",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nb": "norwegian",
    "nn": "norwegian",
    "fa": "persian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "st": "sesotho",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
_AVAILABLE = frozenset(Stemmer.algorithms())
#: The languages stemmed, by primary subtag (those whose algorithm this PyStemmer has) -> the
#: namespace of their stemmed terms.
STEMMERS: dict[str, str] = {}
for _tag, _algorithm in _LANGUAGES.items():
    if _algorithm in _AVAILABLE:
        # the namespace of an algorithm is the first tag that names it ("no" for nb and nn)
        STEMMERS[_tag] = next(t for t, a in _LANGUAGES.items() if a == _algorithm)

_local = threading.local()


def _stemmer(namespace: str) -> Stemmer.Stemmer:
    """The stemmer of a namespace, one per thread (a PyStemmer object is not to be shared
    between threads)."""
    cache: dict[str, Stemmer.Stemmer] | None = getattr(_local, "stemmers", None)
    if cache is None:
        cache = _local.stemmers = {}
    stemmer = cache.get(namespace)
    if stemmer is None:
        stemmer = cache[namespace] = Stemmer.Stemmer(_LANGUAGES[namespace])
    return stemmer


def stem_lang(lang: str) -> str | None:
    """The namespace of the stemmed terms of a page in ``lang`` (a primary subtag, as
    ``doc_meta.doc_lang`` gives it), or None when no stemmer covers it."""
    return STEMMERS.get(lang)


def stem_words(namespace: str, words: Sequence[str]) -> list[str]:
    """The stems of ``words`` (tokens, as the analyzer makes them) in a namespace's language."""
    stems: list[str] = _stemmer(namespace).stemWords(list(words))
    return stems


def _stemmable(word: str) -> bool:
    """Whether a token can have a stem other than itself: it has a letter (a number is its own
    stem in every language)."""
    return not word.isdigit()


def segment_stems(
    terms: Sequence[str], doc_langs: Sequence[str], fields: Iterable[tuple[np.ndarray, np.ndarray]]
) -> tuple[list[str], list[tuple[np.ndarray, np.ndarray]]]:
    """The stemmed terms of a segment being written, and per field their tokens.

    ``terms``: the segment's exact terms by vocabulary id; ``doc_langs``: each document's stem
    namespace ("" for none); ``fields``: per field the vocabulary ids of its tokens, document
    after document (int32), and its tokens per document. Returns the stemmed terms, sorted, and
    per field ``(ids, lens)``: per token of the stemmed documents the place of its stemmed term
    in that list, or its length (``len(stemmed)``) where the word is its own stem, and the
    stemmed documents' token counts (0 for the others), so that a document's positions are its
    exact ones."""
    fields = list(fields)
    names = sorted({ns for ns in doc_langs if ns})
    if not names:
        return [], []
    code_of = {ns: i for i, ns in enumerate(names)}
    doc_code = np.array([code_of[ns] if ns else -1 for ns in doc_langs], dtype=np.int32)
    token_codes = [np.repeat(doc_code, lens) for _, lens in fields]
    stem_id: dict[str, int] = {}
    maps = []  # per namespace: vocabulary id -> stemmed term id, -1 for none
    for code, ns in enumerate(names):
        used = np.unique(np.concatenate([ids[codes == code] for (ids, _), codes in zip(fields, token_codes)]))
        words = [terms[i] for i in used.tolist()]
        mapping = np.full(len(terms), -1, dtype=np.int64)
        groups: dict[str, list[int]] = {}
        inflected: set[str] = set()
        for i, word, stem in zip(used.tolist(), words, stem_words(ns, words)):
            if _stemmable(word):
                groups.setdefault(stem, []).append(i)
                if stem != word:
                    inflected.add(stem)
        for stem in inflected:  # a group of one word that is its own stem: its exact term is it
            mapping[groups[stem]] = stem_id.setdefault(f"{STEM_PREFIX}{ns}:{stem}", len(stem_id))
        maps.append(mapping)
    stemmed = sorted(stem_id)
    place = np.empty(len(stemmed) + 1, dtype=np.int32)
    place[[stem_id[t] for t in stemmed]] = np.arange(len(stemmed), dtype=np.int32)
    place[-1] = len(stemmed)  # a word that is its own stem (mapped to -1, the last place)
    out = []
    for (ids, lens), codes in zip(fields, token_codes):
        keep = codes >= 0
        stem_ids = np.full(int(keep.sum()), -1, dtype=np.int64)
        kept_codes, kept_ids = codes[keep], ids[keep]
        for code, mapping in enumerate(maps):
            sel = kept_codes == code
            stem_ids[sel] = mapping[kept_ids[sel]]
        out.append((place[stem_ids], np.where(doc_code >= 0, lens, 0)))
    return stemmed, out


def query_stems(words: Sequence[str], namespaces: Iterable[str]) -> dict[Term, str]:
    """The stem groups of the query words ``words`` (tokens) in the languages ``namespaces``,
    each with the query word it stems (module docstring): per language and word of stem ``s``,
    the term ``!<lang>:s``, or where a segment does not hold it (no other form of the word in
    its pages), ``s`` itself when ``s`` is a word of its own stem: ``("!en:file", "file")``,
    ``"!en:pars"``."""
    out: dict[Term, str] = {}
    words = [w for w in dict.fromkeys(words) if _stemmable(w)]
    if not words:
        return out
    for ns in namespaces:
        stems = stem_words(ns, words)
        bases = stem_words(ns, stems)
        for word, stem, base in zip(words, stems, bases):
            term = f"{STEM_PREFIX}{ns}:{stem}"
            out.setdefault((term, stem) if base == stem else term, word)
    return out


def stem_of(term: Term) -> str:
    """The stem a stem group (``query_stems``) stands for: ``pars`` for ``!en:pars``."""
    first = term[0] if isinstance(term, tuple) else term
    return first.partition(":")[2] if first.startswith(STEM_PREFIX) else first


def stemmed_term(term: Term) -> str:
    """The stemmed term of a stem group (``!en:pars``), the one a segment with other forms holds."""
    return term[0] if isinstance(term, tuple) else term
