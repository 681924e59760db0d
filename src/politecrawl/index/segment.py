"""The immutable, versioned on-disk segment format (no pickle).

A segment is a directory ``seg-NNNNNN/`` written once and never modified::

    header.json         {"format": "politecrawl-segment", "version": 1,
                         "doc_count", "term_count", "fields", "posting_counts",
                         "field_lengths", "analyzer"}
    terms.txt           the term dictionary: sorted terms, UTF-8, one per line
                        (tokens never contain a newline); term id = line number
    <field>.term_ptr.npy  int64[T+1]  postings of term t are [ptr[t], ptr[t+1])
    <field>.docs.npy      uint[P]     doc ids, delta-encoded within each term
                                      (the first of a term is absolute), so a
                                      term's doc ids are ``np.cumsum(slice)``
    <field>.tfs.npy       uint[P]     term frequency per posting
    <field>.pos_ptr.npy   int64[T+1]  positions of term t start at pos_ptr[t];
                                      posting p of t (lo <= p < hi) starts
                                      ``sum(tfs[lo:p])`` later and has tfs[p]
    <field>.positions.npy uint[Q]     token positions, delta-encoded within each
                                      posting (the first is absolute)
    doc_lens.npy        uint32[n, F]  tokens per document and field
    docs.json           {"urls": [...], "titles": [...]}  (local doc id = index)
    bodies.bin          zlib-compressed stored body texts, concatenated
    body_ptr.npy        int64[n+1]    body of doc i is bodies.bin[ptr[i]:ptr[i+1]]

for each field of ``FIELDS`` (title, body).  ``uint`` arrays use the smallest
of uint8/16/32 that holds their values (the dtype is in the .npy header).  Arrays are ``np.save`` files read
back with ``np.load(mmap_mode="r")``; ``bodies.bin`` is memory-mapped too.

Writing happens in a hidden temporary directory that is fsync'ed and then
renamed into place, so a segment directory is either complete or absent.
Deletions never touch a segment: they are tombstones in the generation file.
"""

from __future__ import annotations

import codecs
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from ..errors import SearchIndexError
from .analysis import Analyzer
from .bm25 import FIELDS

__all__ = ["FORMAT", "VERSION", "Segment", "write_segment"]

FORMAT = "politecrawl-segment"
VERSION = 1


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _save(dirpath: Path, name: str, arr: np.ndarray) -> None:
    with open(dirpath / name, "wb") as fh:
        np.save(fh, arr, allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())


def _write_bytes(dirpath: Path, name: str, data: bytes) -> None:
    with open(dirpath / name, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _smallest_uint(arr: np.ndarray) -> np.ndarray:
    top = int(arr.max()) if len(arr) else 0
    for dt in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dt).max:
            return arr.astype(dt)
    raise SearchIndexError("segment too large: a value does not fit in uint32")


def _build_field_postings(tids: np.ndarray, docs: np.ndarray, poss: np.ndarray, n_terms: int):
    """Sort (term, doc, pos) triples into the postings arrays of one field."""
    order = np.lexsort((poss, docs, tids))
    tids, docs, poss = tids[order], docs[order], poss[order]
    if len(tids):
        new_posting = np.empty(len(tids), dtype=bool)
        new_posting[0] = True
        new_posting[1:] = (tids[1:] != tids[:-1]) | (docs[1:] != docs[:-1])
        starts = np.flatnonzero(new_posting)
    else:
        starts = np.zeros(0, dtype=np.int64)
    p_bounds = np.append(starts, len(tids)).astype(np.int64)
    tfs = np.diff(p_bounds)
    p_terms = tids[starts]
    p_docs = docs[starts].astype(np.int64)
    term_ptr = np.searchsorted(p_terms, np.arange(n_terms + 1), side="left").astype(np.int64)
    # Delta-encode doc ids within each term; the first posting of a term stays absolute.
    deltas = p_docs.copy()
    if len(deltas):
        deltas[1:] -= p_docs[:-1]
        firsts = term_ptr[:-1][term_ptr[:-1] < term_ptr[1:]]
        deltas[firsts] = p_docs[firsts]
    # Positions: delta-encoded within each posting, the first one absolute.
    pos_deltas = poss.astype(np.int64)
    if len(pos_deltas):
        pos_deltas[1:] -= poss[:-1]
        pos_deltas[starts] = poss[starts]
    pos_ptr = p_bounds[np.minimum(term_ptr, len(starts))] if len(starts) else np.zeros(n_terms + 1, np.int64)
    return term_ptr, _smallest_uint(deltas), _smallest_uint(tfs), pos_ptr.astype(np.int64), _smallest_uint(pos_deltas)


def write_segment(
    seg_dir: Path, documents: Iterable[tuple[str, str, str]], analyzer: Analyzer
) -> int:
    """Analyse ``(url, title, body)`` documents into a new segment at ``seg_dir``.

    Returns the number of documents written.  ``seg_dir`` must not exist.
    """
    seg_dir = Path(seg_dir)
    vocab: dict[str, int] = {}
    per_field: dict[str, tuple[list, list, list]] = {f: ([], [], []) for f in FIELDS}
    urls: list[str] = []
    titles: list[str] = []
    lens: list[list[int]] = []
    bodies: list[bytes] = []

    for doc_id, (url, title, body) in enumerate(documents):
        urls.append(url)
        titles.append(title)
        bodies.append(zlib.compress(body.encode("utf-8", "surrogatepass"), 6))
        row = []
        for f, text in zip(FIELDS, (title, body)):
            toks = analyzer.tokenize(text)
            row.append(len(toks))
            if toks:
                for t in set(toks).difference(vocab):
                    vocab[t] = len(vocab)
                ids = np.fromiter(map(vocab.__getitem__, toks), dtype=np.int64, count=len(toks))
                t_list, d_list, p_list = per_field[f]
                t_list.append(ids)
                d_list.append(np.full(len(toks), doc_id, dtype=np.int64))
                p_list.append(np.arange(len(toks), dtype=np.int64))
        lens.append(row)

    n_docs = len(urls)
    terms = sorted(vocab)
    rank = np.empty(len(vocab), dtype=np.int64)
    for r, t in enumerate(terms):
        rank[vocab[t]] = r

    seg_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-" + seg_dir.name + "-", dir=seg_dir.parent))
    try:
        posting_counts = {}
        for f in FIELDS:
            t_list, d_list, p_list = per_field[f]
            cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)  # noqa: E731
            tids = rank[cat(t_list)] if t_list else np.zeros(0, dtype=np.int64)
            term_ptr, deltas, tfs, pos_ptr, positions = _build_field_postings(
                tids, cat(d_list), cat(p_list), len(terms)
            )
            posting_counts[f] = int(len(tfs))
            _save(tmp, f"{f}.term_ptr.npy", term_ptr)
            _save(tmp, f"{f}.docs.npy", deltas)
            _save(tmp, f"{f}.tfs.npy", tfs)
            _save(tmp, f"{f}.pos_ptr.npy", pos_ptr)
            _save(tmp, f"{f}.positions.npy", positions)
        doc_lens = np.array(lens, dtype=np.uint32).reshape(n_docs, len(FIELDS))
        _save(tmp, "doc_lens.npy", doc_lens)
        body_ptr = np.zeros(n_docs + 1, dtype=np.int64)
        if bodies:
            body_ptr[1:] = np.cumsum([len(b) for b in bodies])
        _save(tmp, "body_ptr.npy", body_ptr)
        _write_bytes(tmp, "bodies.bin", b"".join(bodies))
        _write_bytes(tmp, "terms.txt", "\n".join(terms).encode("utf-8"))
        _write_bytes(tmp, "docs.json", json.dumps({"urls": urls, "titles": titles}, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        header = {
            "format": FORMAT,
            "version": VERSION,
            "doc_count": n_docs,
            "term_count": len(terms),
            "fields": list(FIELDS),
            "posting_counts": posting_counts,
            "field_lengths": {f: int(doc_lens[:, i].sum()) for i, f in enumerate(FIELDS)},
            "analyzer": analyzer.to_json(),
        }
        _write_bytes(tmp, "header.json", json.dumps(header, indent=1).encode("utf-8"))
        _fsync_dir(tmp)
        os.rename(tmp, seg_dir)
        _fsync_dir(seg_dir.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return n_docs


class FieldPostings:
    """Memory-mapped postings of one field of one segment."""

    __slots__ = ("term_ptr", "docs", "tfs", "pos_ptr", "positions")

    def __init__(self, seg_dir: Path, field: str):
        self.term_ptr = _load(seg_dir / f"{field}.term_ptr.npy")
        self.docs = _load(seg_dir / f"{field}.docs.npy")
        self.tfs = _load(seg_dir / f"{field}.tfs.npy")
        self.pos_ptr = _load(seg_dir / f"{field}.pos_ptr.npy")
        self.positions = _load(seg_dir / f"{field}.positions.npy")

    def range(self, term_id: int) -> tuple[int, int]:
        return int(self.term_ptr[term_id]), int(self.term_ptr[term_id + 1])

    def postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(doc ids, term frequencies, index of the first posting)."""
        lo, hi = self.range(term_id)
        docs = np.cumsum(self.docs[lo:hi], dtype=np.int64)
        return docs, np.asarray(self.tfs[lo:hi]), lo

    def positions_of(self, term_id: int, posting: int) -> np.ndarray:
        """Absolute positions (int64, ascending) of one posting of ``term_id``."""
        lo = int(self.term_ptr[term_id])
        start = int(self.pos_ptr[term_id]) + int(np.sum(self.tfs[lo:posting], dtype=np.int64))
        return np.cumsum(self.positions[start : start + int(self.tfs[posting])], dtype=np.int64)


def _load(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise
    except (ValueError, OSError) as exc:
        raise SearchIndexError(f"corrupt segment file {path}: {exc}") from exc


class Segment:
    """Read access to one segment directory (immutable)."""

    def __init__(self, seg_dir: Path):
        self.path = Path(seg_dir)
        try:
            header = json.loads((self.path / "header.json").read_text("utf-8"))
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise SearchIndexError(f"unreadable segment header in {self.path}: {exc}") from exc
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise SearchIndexError(
                f"{self.path}: unsupported segment format {header.get('format')!r} "
                f"version {header.get('version')!r} (this code reads {FORMAT} v{VERSION})"
            )
        if header.get("fields") != list(FIELDS):
            raise SearchIndexError(f"{self.path}: unexpected fields {header.get('fields')!r}")
        self.header = header
        self.doc_count: int = int(header["doc_count"])
        raw_terms = (self.path / "terms.txt").read_bytes().decode("utf-8")
        self.terms: dict[str, int] = (
            {t: i for i, t in enumerate(raw_terms.split("\n"))} if header["term_count"] else {}
        )
        if len(self.terms) != header["term_count"]:
            raise SearchIndexError(f"{self.path}: term dictionary does not match header")
        self.fields = {f: FieldPostings(self.path, f) for f in FIELDS}
        self.doc_lens = _load(self.path / "doc_lens.npy")
        self.body_ptr = _load(self.path / "body_ptr.npy")
        docs = json.loads((self.path / "docs.json").read_bytes().decode("utf-8", "surrogatepass"))
        self.urls: list[str] = docs["urls"]
        self.titles: list[str] = docs["titles"]
        if len(self.urls) != self.doc_count or self.doc_lens.shape[0] != self.doc_count:
            raise SearchIndexError(f"{self.path}: document table does not match header")
        body_size = int(self.body_ptr[-1]) if self.doc_count else 0
        self._bodies = (
            np.memmap(self.path / "bodies.bin", dtype=np.uint8, mode="r") if body_size else np.zeros(0, np.uint8)
        )
        self._hosts: list[str] | None = None

    def term_id(self, term: str) -> int | None:
        return self.terms.get(term)

    def body(self, doc: int, max_chars: int | None = None) -> str:
        """Stored body text; with ``max_chars``, at least that prefix (cheaper)."""
        data = bytes(self._bodies[int(self.body_ptr[doc]) : int(self.body_ptr[doc + 1])])
        if not data:
            return ""
        if max_chars is None:
            return zlib.decompress(data).decode("utf-8", "surrogatepass")
        raw = zlib.decompressobj().decompress(data, 4 * max_chars)
        return codecs.getincrementaldecoder("utf-8")("surrogatepass").decode(raw, final=False)

    def documents(self, doc_ids: Iterable[int]) -> Iterator[tuple[str, str, str]]:
        for d in doc_ids:
            yield self.urls[d], self.titles[d], self.body(d)

    def hosts(self) -> list[str]:
        """Lower-cased URL host per document (computed once, on first use)."""
        if self._hosts is None:
            from urllib.parse import urlsplit

            out = []
            for u in self.urls:
                try:
                    h = (urlsplit(u).hostname or "").rstrip(".")
                except ValueError:
                    h = ""
                out.append(h[4:] if h.startswith("www.") else h)
            self._hosts = out
        return self._hosts
