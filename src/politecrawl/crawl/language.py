"""The language of a page that declares none, for the index (``lang:`` and the stemmed field).

A page's language is what it declares (``<html lang>``, else its Content-Language header: the
store's ``language``); a page that declares none is given the language CLD2 (``pycld2``, the
Compact Language Detector of Chromium, compiled) finds in the start of its text, when CLD2 says
it is sure. On the python3-doc pages, the first ``DETECT_CHARS`` characters of a page take CLD2
about 0.09 ms, and it adds about 0.5 MB to the process; py3langid, measured beside it, took 0.74
ms a page and 71 MB for its model (``benchmarks/bench_search_relevance.py --language-cost``).

Without pycld2 (an install that could not build it), pages that declare no language stay
without one: found by their exact words only.
"""

from __future__ import annotations

from politecrawl.index.doc_meta import doc_lang

__all__ = ["DETECT_CHARS", "MIN_CHARS", "detect", "page_language"]

#: The start of a page's text that detection reads: enough to be sure, and a bounded cost.
DETECT_CHARS = 3000
#: Shorter texts are not guessed at: a few words say little of their language.
MIN_CHARS = 200

try:
    import pycld2 as _cld2
except ImportError:  # pragma: no cover - an install without it
    _cld2 = None


def page_language(declared: str | None, text: str) -> str:
    """The primary language subtag of a page: the one it declares, else the one detected in its
    text (``detect``), else ""."""
    return doc_lang(declared) or detect(text)


def detect(text: str) -> str:
    """The primary subtag of the language of ``text`` when CLD2 is sure of it, else ""."""
    if _cld2 is None or len(text) < MIN_CHARS:
        return ""
    sample = text[:DETECT_CHARS].encode("utf-8", "replace").decode("utf-8")  # CLD2 takes valid UTF-8
    try:
        reliable, _, languages = _cld2.detect(sample)
    except _cld2.error:  # text it cannot read (control bytes): no guess
        return ""
    code = languages[0][1] if languages else "un"
    return doc_lang(code) if reliable and code not in ("un", "xxx") else ""
