"""What a search filters and counts documents by, besides their words: kind, language, date.

Each document of a segment (format 8) has one metadata string in ``meta.bin`` (a
``doc_table.TextTable``, as its URL and title are): its kind, its language and its date joined
by tabs, each empty when unknown:

* kind: what ``filetype:``/``type:`` matches, from the stored content type (``doc_kind``:
  ``text/html`` -> ``html``, ``application/pdf`` -> ``pdf``, ``text/plain`` -> ``txt``);
* language: the primary subtag of the page's language, declared (``<html lang="en-GB">`` ->
  ``en``), what ``lang:`` matches (``doc_lang``);
* date: ``YYYY-MM-DD`` (UTC) of the page's ``Last-Modified`` header, else of the day it was
  fetched (``doc_date``), what ``after:`` and ``before:`` compare.

A segment written before format 8 has none: its documents' kind, language and date are
unknown, so every such filter leaves them out (``politecrawl index --rebuild`` gives them).

``DocFacets`` holds a segment's values as small integer codes, decoded once per segment, so a
filter is one comparison per document (a bool mask, kept for the last few filters) and a facet
count one ``bincount`` over the matched documents.
"""

from __future__ import annotations

import datetime
import email.utils
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["DocFacets", "doc_date", "doc_kind", "doc_lang", "encode_meta", "meta_lang"]

#: Content types (without parameters) -> the kind ``filetype:`` names; others: their subtype.
_KINDS = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "text/plain": "txt",
    "application/xml": "xml",
    "text/xml": "xml",
    "application/json": "json",
    "text/markdown": "md",
}


def doc_kind(content_type: str | None) -> str:
    """The kind of a document of this content type ("" when unknown)."""
    if not content_type:
        return ""
    mime = content_type.split(";", 1)[0].strip().lower()
    kind = _KINDS.get(mime)
    if kind is None:
        sub = mime.rpartition("/")[2]
        kind = sub[2:] if sub.startswith("x-") else sub
    return "".join(c for c in kind if c.isalnum() or c in "+.-")[:32]


def doc_lang(language: str | None) -> str:
    """The primary language subtag, lower-cased ("" when none or not a language tag)."""
    if not language:
        return ""
    primary = language.strip().lower().replace("_", "-").split("-", 1)[0]
    return primary if 2 <= len(primary) <= 8 and primary.isascii() and primary.isalpha() else ""


def doc_date(last_modified: str | None, fetched_at: float | None) -> str:
    """``YYYY-MM-DD`` (UTC) of ``last_modified`` (an HTTP date) if it parses, else of
    ``fetched_at`` (epoch seconds); "" when neither is known."""
    if last_modified:
        try:
            when = email.utils.parsedate_to_datetime(last_modified)
        except (TypeError, ValueError, IndexError):
            when = None
        if when is not None:
            if when.tzinfo is not None:
                when = when.astimezone(datetime.timezone.utc)
            return when.date().isoformat()
    if fetched_at:
        try:
            return datetime.datetime.fromtimestamp(float(fetched_at), datetime.timezone.utc).date().isoformat()
        except (OverflowError, OSError, ValueError):
            return ""
    return ""


def encode_meta(kind: str, lang: str, date: str) -> str:
    """A document's metadata string (``meta.bin``): the three values joined by tabs."""
    return "\t".join(v.replace("\t", " ") for v in (kind, lang, date))


def meta_lang(meta: str) -> str:
    """The language of a document's metadata string ("" when unknown)."""
    return meta.split("\t", 2)[1] if "\t" in meta else ""


class DocFacets:
    """A segment's documents' kinds, languages, dates and sites as codes into their distinct
    values (``kinds``, ``langs``, ``sites``; code 0 of kinds and langs is "", unknown)."""

    __slots__ = ("kinds", "kind_codes", "langs", "lang_codes", "dates", "sites", "site_codes", "_masks")

    def __init__(self, metas: Iterable[str] | None, hosts: Sequence[str], n_docs: int):
        kinds: dict[str, int] = {"": 0}
        langs: dict[str, int] = {"": 0}
        kind_codes = np.zeros(n_docs, dtype=np.int32)
        lang_codes = np.zeros(n_docs, dtype=np.int32)
        #: days since 1970-01-01 per document; -1: unknown
        dates = np.full(n_docs, -1, dtype=np.int32)
        if metas is not None:
            epoch = datetime.date(1970, 1, 1)
            for i, meta in enumerate(metas):
                kind, _, rest = meta.partition("\t")
                lang, _, date = rest.partition("\t")
                kind_codes[i] = kinds.setdefault(kind, len(kinds))
                lang_codes[i] = langs.setdefault(lang, len(langs))
                if date:
                    try:
                        dates[i] = (datetime.date.fromisoformat(date) - epoch).days
                    except ValueError:
                        pass
        sites: dict[str, int] = {}
        self.site_codes = np.fromiter((sites.setdefault(h, len(sites)) for h in hosts), dtype=np.int32, count=n_docs)
        self.kinds, self.langs, self.sites = list(kinds), list(langs), list(sites)
        self.kind_codes, self.lang_codes, self.dates = kind_codes, lang_codes, dates
        self._masks: dict[tuple[object, ...], np.ndarray] = {}

    def mask(self, types: tuple[str, ...], langs: tuple[str, ...], after: str | None, before: str | None) -> np.ndarray:
        """Per document: whether it is of one of ``types`` (any if empty), in one of ``langs``
        (any if empty), dated on or after ``after`` and before ``before``."""
        key = (types, langs, after, before)
        mask = self._masks.get(key)
        if mask is not None:
            return mask
        mask = np.ones(len(self.kind_codes), dtype=bool)
        if types:
            mask &= np.isin(self.kind_codes, [self.kinds.index(t) for t in types if t in self.kinds])
        if langs:
            mask &= np.isin(self.lang_codes, [self.langs.index(x) for x in langs if x in self.langs])
        epoch = datetime.date(1970, 1, 1)
        if after:
            mask &= self.dates >= (datetime.date.fromisoformat(after) - epoch).days
        if before:
            mask &= (self.dates >= 0) & (self.dates < (datetime.date.fromisoformat(before) - epoch).days)
        if len(self._masks) >= 8:
            self._masks.pop(next(iter(self._masks)))
        self._masks[key] = mask
        return mask

    def count(self, docs: np.ndarray) -> dict[str, dict[str, int]]:
        """Of the documents ``docs`` (local ids): how many per site, kind and language (unknown
        kinds and languages left out)."""
        out: dict[str, dict[str, int]] = {}
        for name, codes, values, skip in (
            ("site", self.site_codes, self.sites, -1),
            ("type", self.kind_codes, self.kinds, 0),
            ("lang", self.lang_codes, self.langs, 0),
        ):
            counts = np.bincount(codes[docs], minlength=len(values)) if len(docs) else np.zeros(len(values), np.int64)
            out[name] = {values[c]: int(n) for c, n in enumerate(counts.tolist()) if n and c != skip}
        return out
