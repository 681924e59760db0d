"""The immutable, versioned on-disk segment format (no pickle): reading and checking it.

A segment is a directory ``seg-NNNNNN/`` written once and never modified: the term dictionary,
per field the postings (doc ids and tfs bit-packed in blocks of ``BLOCK``), the positions
(bit-packed in chunks), the skip blocks, the documents' lengths, URLs, titles and kind, language
and date, and the stored bodies (LZ4 pieces between sync points). Arrays are ``np.save`` files
memory-mapped on open, so a search touches only the pages it reads; ``bodies.bin`` is read with
``os.pread`` a body at a time, never mapped, because a mapping's fault-around kept most of it
resident. Older formats are read as they are and rewritten in the current one by the next
merge.

This module reads and checks segments (``Segment``); ``segment_write`` writes them (in a hidden
temporary directory that is fsync'ed and then renamed into place, so a segment directory is
either complete or absent) and ``segment_merge`` merges them. Deletions never touch a segment:
they are tombstones in the generation file (``generation``). Every file, column and format
version is described in docs/search.md, "The segment format on disk".
"""

from __future__ import annotations

import json
import os
import re
import threading
import weakref
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from politecrawl.errors import SearchIndexError

from . import kernels
from .bm25 import FIELDS
from .bodies import open_body
from .doc_meta import DocFacets
from .doc_table import TextTable
from .field_postings import TERM_TABLE_COLUMNS, TERM_TABLE_COLUMNS_V4, FieldPostings, _load
from .skip_blocks import BLOCK, posting_blocks
from .term_table import TermTable, kernel_column

#: A crawled URL's scheme and host as the crawler stores them (lower case, no user, an optional
#: port): read by one match, seven times as fast as ``urlsplit``; any other URL goes to
#: ``urlsplit``, whose ``hostname`` this is wherever it matches.
_PLAIN_HOST = re.compile(r"[a-z][a-z0-9+.-]*://([a-z0-9._-]*)(?::[0-9]*)?(?:[/?#]|\Z)")

__all__ = [
    "BLOCK",
    "FORMAT",
    "POSITIONS_MAP_BUDGET",
    "READABLE_VERSIONS",
    "TERM_KEY_STRIDE",
    "TERM_TABLE_COLUMNS",
    "TERM_TABLE_COLUMNS_V4",
    "VERSION",
    "FieldPostings",
    "Segment",
    "posting_blocks",
    "term_ends",
    "term_keys",
]

FORMAT = "politecrawl-segment"
#: 4: URLs and titles as blobs (``doc_table``) instead of ``docs.json``, and one per-term table of
#: pointers (``terms.ptr.npy``; a segment without it, as the first code writing version 4 wrote
#: them, is read from a file per pointer array); 3: stored bodies are LZ4 pieces; 2: zlib streams
#: (still read, and written with ``bodies.BODY_CODEC = "zlib"``), the anchor field.
#: 5: each field's doc ids and tfs bit-packed in blocks of ``BLOCK`` postings
#: (``packed_postings``), a fourth column per field in the per-term table (where a term's blocks
#: start) and a fifth in the skip blocks (where each block starts).
#: 6: each field's positions bit-packed in chunks of ``packed_positions.CHUNK`` with a chunk table
#: (``<field>.pos_chunks.npy``), and the type format 5 would store them in in the header.
#: 7: the per-term table packed in blocks (``term_table``: ``terms.ptr.dir.npy`` and
#: ``terms.ptr.bits.npy`` in place of ``terms.ptr.npy``).
#: 8: per document its kind, language and date (``meta.bin``, ``meta.end.npy``: ``doc_meta``),
#: what the ``filetype:``, ``lang:``, ``after:`` and ``before:`` filters read; older segments'
#: documents have none (unknown: every such filter leaves them out).
#: 9: the stemmed field: terms ``!<lang>:<stem>`` (``stemming``) first in the dictionary, at the
#: positions of their documents' inflected words, and in the header the languages (``"stems"``)
#: of the documents stemmed; older segments' documents have no stemmed terms (found by their
#: exact words only, until ``politecrawl index --rebuild``).
VERSION = 9
READABLE_VERSIONS = (2, 3, 4, 5, 6, 7, 8, 9)


_NO_SYNC = np.zeros((0, 3), dtype=np.int64)
_NO_SYNC.flags.writeable = False


#: Bytes of the body's positions that the kernels of one process read through a mapping, segment
#: by segment as they open; the positions of the segments past it are read with ``pread``. Mapped,
#: a query's scattered reads cost nothing once the pages are in, but each first touch keeps the
#: 64 KB around it (the kernel's fault-around), so a large index's positions became resident
#: (601 MB at a million pages); read, each run of positions is a system call, several hundred for
#: a long query of common words (+0.2 ms at 8,000 pages, docs/search.md). The budget keeps the
#: speed of a small index and bounds what a large one keeps resident.
POSITIONS_MAP_BUDGET = 16 * 2**20
_positions_mapped = 0
_positions_lock = threading.Lock()


def _reserve_positions_map(owner: object, nbytes: int) -> bool:
    """Whether ``nbytes`` more of mapped positions fit in ``POSITIONS_MAP_BUDGET``; if so they
    are counted until ``owner`` goes."""
    global _positions_mapped
    with _positions_lock:
        if _positions_mapped + nbytes > POSITIONS_MAP_BUDGET:
            return False
        _positions_mapped += nbytes
    weakref.finalize(owner, _release_positions_map, nbytes)
    return True


def _release_positions_map(nbytes: int) -> None:
    global _positions_mapped
    with _positions_lock:
        _positions_mapped -= nbytes


def _ints(arr: np.ndarray) -> memoryview:
    """A 1-D integer array as a memoryview in native byte order (the same memory when it is)."""
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("=")).data


#: Every this many terms of the dictionary, the first 8 bytes of one are sampled into
#: ``terms.keys.npy`` (``term_keys``): the compiled lookup bisects those, then this many terms.
TERM_KEY_STRIDE = 32


def term_ends(blob: np.ndarray) -> np.ndarray:
    """Where each term of a dictionary (``terms.txt``: one per line) ends in it: the offset of its
    newline, or the length of the blob for the last."""
    ends = np.append(np.flatnonzero(blob == 0x0A), len(blob))
    return ends.astype(np.uint32 if len(blob) < 2**32 else np.uint64)


def term_keys(blob: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The first 8 bytes of every ``TERM_KEY_STRIDE``-th term as a big-endian number, zero-padded
    (ordered as the terms are: UTF-8 byte order, and no term holds a zero byte)."""
    picked = np.arange(0, len(ends), TERM_KEY_STRIDE)
    if not len(picked):
        return np.zeros(0, dtype=np.uint64)
    ends64 = np.asarray(ends, dtype=np.int64)
    starts = np.where(picked > 0, ends64[np.maximum(picked - 1, 0)] + 1, 0)
    lens = ends64[picked] - starts
    out = np.zeros((len(picked), 8), dtype=np.uint8)
    for k in range(8):
        has = lens > k
        out[has, k] = blob[starts[has] + k]
    return out.view(">u8").ravel().astype(np.uint64)


def _load_terms(path: Path, n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``terms.txt`` memory-mapped as bytes, where each term ends in it (``term_ends``) and the
    sampled keys (``term_keys``): from the segment's files, or for a segment written before they
    existed, computed (which reads the whole dictionary)."""
    try:
        size = path.stat().st_size
        blob = np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray) if size else np.zeros(0, np.uint8)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise SearchIndexError(f"corrupt segment file {path}: {exc}") from exc
    if not n_terms:
        if size:
            raise SearchIndexError(f"{path.parent}: term dictionary does not match header")
        return blob, np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.uint64)
    try:
        ends = _load(path.parent / "terms.end.npy")
        keys = _load(path.parent / "terms.keys.npy")
    except FileNotFoundError:
        ends = term_ends(blob)
        keys = term_keys(blob, ends)
    if len(ends) != n_terms or len(keys) != -(-n_terms // TERM_KEY_STRIDE):
        raise SearchIndexError(f"{path.parent}: term dictionary does not match header")
    return blob, ends, keys


class _TermList:
    """The terms of a dictionary as a sequence of UTF-8 ``bytes``, read from the mapping (for
    ``bisect`` where the compiled lookup is not in use)."""

    __slots__ = ("_blob", "_ends")

    def __init__(self, blob: np.ndarray, ends: np.ndarray):
        self._blob, self._ends = blob, ends

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> bytes:
        start = int(self._ends[i - 1]) + 1 if i else 0
        return bytes(self._blob[start : int(self._ends[i])])


class Segment:
    """Read access to one segment directory (immutable)."""

    def __init__(self, seg_dir: Path):
        self.path = Path(seg_dir)
        st = os.stat(self.path)
        #: the directory's (inode, mtime, ctime): a cache keyed by name checks it is the same segment
        self.identity = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        try:
            header = json.loads((self.path / "header.json").read_text("utf-8"))
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise SearchIndexError(f"unreadable segment header in {self.path}: {exc}") from exc
        if header.get("format") != FORMAT or header.get("version") not in READABLE_VERSIONS:
            raise SearchIndexError(
                f"{self.path}: unsupported segment format {header.get('format')!r} "
                f"version {header.get('version')!r} (this code reads {FORMAT} v{VERSION}): "
                "rebuild it with 'politecrawl index --rebuild'"
            )
        if header.get("fields") != list(FIELDS):
            raise SearchIndexError(f"{self.path}: unexpected fields {header.get('fields')!r}")
        self.header = header
        stems = header.get("stems", [])
        if not (isinstance(stems, list) and all(isinstance(x, str) for x in stems)):
            raise SearchIndexError(f"{self.path}: stemmed languages in the header that are not a list of names")
        #: the languages (``stemming`` namespaces) of the documents whose stems it holds (format 9)
        self.stems: tuple[str, ...] = tuple(stems)
        #: "lz4" (versions 3 and 4) or "zlib" (version 2): how the stored bodies are compressed
        self.body_codec = "lz4" if header["version"] >= 3 else "zlib"
        self.doc_count: int = int(header["doc_count"])
        # The term dictionary stays in its file, memory-mapped, and is searched by bisection: a
        # Python dict of a segment's terms held ~100 bytes per term, which over the dozens of
        # segments of a million-page index was most of a searching process's memory.
        self.n_terms: int = int(header["term_count"])
        self._terms_blob, self._term_end, self._term_keys = _load_terms(self.path / "terms.txt", self.n_terms)
        self._kernel: object | None = None
        # One row per term of every field's pointers (postings, positions, skip blocks), 4 bytes
        # each: a term looked up touches one place instead of one in each of nine files.
        columns = TERM_TABLE_COLUMNS if header["version"] >= 5 else TERM_TABLE_COLUMNS_V4
        try:
            table: TermTable | None = TermTable.load(
                self.path, self.n_terms + 1, columns, header["version"] >= 7, _load
            )
        except FileNotFoundError:
            if header["version"] >= 5:
                raise SearchIndexError(f"{self.path}: per-term table missing") from None
            table = None  # format 4's first writer, and formats 2 and 3: a file per pointer array
        tf_max = header.get("tf_max", {})
        # format 6: the type format 5 would store each field's positions in (packed, they are not)
        pos_dtypes = header.get("positions_dtype") if header["version"] >= 6 else {}
        if header["version"] >= 6 and not (
            isinstance(pos_dtypes, dict) and all(isinstance(pos_dtypes.get(f), str) for f in FIELDS)
        ):
            raise SearchIndexError(f"{self.path}: positions types missing from the header")
        self.fields = {
            f: FieldPostings(self.path, f, table, self.doc_count, tf_max.get(f), pos_dtypes.get(f)) for f in FIELDS
        }
        self.doc_lens = _load(self.path / "doc_lens.npy")
        self.body_ptr = _load(self.path / "body_ptr.npy")
        if header["version"] >= 4:
            self.urls = TextTable.load(self.path, "urls", self.doc_count)
            self.titles = TextTable.load(self.path, "titles", self.doc_count)
        else:  # formats 2 and 3: the lists in docs.json, held as the same tables
            docs = json.loads((self.path / "docs.json").read_bytes().decode("utf-8", "surrogatepass"))
            self.urls = TextTable.from_strings(docs["urls"])
            self.titles = TextTable.from_strings(docs["titles"])
        #: per document its kind, language and date (``doc_meta``); None before format 8
        self.meta = TextTable.load(self.path, "meta", self.doc_count) if header["version"] >= 8 else None
        self._facets: DocFacets | None = None
        if len(self.urls) != self.doc_count or len(self.titles) != self.doc_count:
            raise SearchIndexError(f"{self.path}: document table does not match header")
        if self.doc_lens.shape[0] != self.doc_count or len(self.body_ptr) != self.doc_count + 1:
            raise SearchIndexError(f"{self.path}: document table does not match header")
        # Stored bodies are read with pread, a hit's at a time, not through a mapping: each first
        # touch of a mapped page maps the 64 KB around it (the kernel's fault-around), so over a
        # million pages the snippets' scattered reads kept most of bodies.bin resident.
        try:
            self._bodies_fd = os.open(self.path / "bodies.bin", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise SearchIndexError(f"unreadable segment file {self.path / 'bodies.bin'}: {exc}") from exc
        weakref.finalize(self, os.close, self._bodies_fd)
        self._bodies_size = os.fstat(self._bodies_fd).st_size
        self._hosts: list[str] | None = None
        self._site_masks: dict[str, np.ndarray] = {}
        if (self.path / "body_sync_ptr.npy").exists():
            self.body_sync_ptr: np.ndarray | None = _load(self.path / "body_sync_ptr.npy")
            self.body_sync: np.ndarray | None = _load(self.path / "body_sync.npy")
        else:  # written before sync points existed
            self.body_sync_ptr = self.body_sync = None
        # A hit's body and sync points are found through memoryviews of the pointers: indexing
        # one gives a Python int at once, where numpy makes a scalar object first, per hit.
        self._body_ends = _ints(self.body_ptr)
        self._sync_ends = None if self.body_sync_ptr is None else _ints(self.body_sync_ptr)

    def sync_points(self, doc: int) -> np.ndarray:
        """``(byte offset, character offset, token position)`` rows of ``doc``'s sync points
        (shape ``(k, 3)``, ascending; empty for a short body or an older segment)."""
        ends = self._sync_ends
        if ends is None or self.body_sync is None:
            return _NO_SYNC
        start, end = ends[doc], ends[doc + 1]
        return self.body_sync[start:end] if end > start else _NO_SYNC

    def term_id(self, term: str | tuple[str, ...]) -> int | None:
        """The term's id in this segment (its line in ``terms.txt``), None if it has none. A tuple
        of terms is its first term this segment has (``stemming``: a stem group, whose stemmed
        term a segment without other forms of the word does not hold)."""
        if isinstance(term, tuple):
            for alternative in term:
                tid = self.term_id(alternative)
                if tid is not None:
                    return tid
            return None
        kernel = self.kernel
        if kernel is not None:
            tid = kernel.lookup(term)
            return tid if tid >= 0 else None
        try:
            key = term.encode("utf-8")
        except UnicodeEncodeError:
            return None
        terms = _TermList(self._terms_blob, self._term_end)
        i = bisect_left(terms, key)
        return i if i < len(terms) and terms[i] == key else None

    def term_dictionary(self) -> tuple[np.ndarray, np.ndarray]:
        """``terms.txt`` (UTF-8, a term per line, in id order) and where each term ends in it."""
        return self._terms_blob, self._term_end

    @property
    def kernel(self):
        """This segment's postings for the compiled kernels (``kernels.compiled.Postings``), or None
        where they are not in use."""
        compiled = kernels.compiled
        if compiled is None:
            return None
        if self._kernel is None:
            # The body's positions are read with pread past the mapping budget; the title's and the
            # anchor's stay mapped: they are a small part of the whole (titles are a few words),
            # and the proximity rerank reads the title's as often as the body's.
            # Packed positions (format 6) count at format 5's size: the same segment is mapped or
            # read as it was (``FieldPostings.positions_map_cost``).
            mapped = _reserve_positions_map(self, self.fields["body"].positions_map_cost())
            arrays = []
            for fi, (f, fp) in enumerate(self.fields.items()):
                block_ptr, blocks = fp.blocks(self.doc_lens[:, fi])
                arrays.append(
                    (
                        kernel_column(fp.term_ptr),
                        *((fp.docs, fp.tfs) if fp.pack_ptr is None else (fp.packed, kernel_column(fp.pack_ptr))),
                        kernel_column(fp.pos_ptr),
                        fp.kernel_positions(mapped or f != "body"),
                        kernel_column(block_ptr),
                        blocks,
                    )
                )
            try:
                self._kernel = compiled.Postings(
                    self.doc_count, self._terms_blob, self._term_end, self._term_keys, arrays
                )
            except ValueError as exc:
                raise SearchIndexError(f"{self.path}: {exc}") from exc
        return self._kernel

    def body_bytes(self, doc: int) -> bytes:
        """The stored body of ``doc``, still compressed (``body_codec``)."""
        return self.stored_bytes(self._body_ends[doc], self._body_ends[doc + 1])

    def body_buffer(self, doc: int) -> bytes:
        """``body_bytes`` (what a snippet reads a small part of)."""
        return self.body_bytes(doc)

    def stored_bytes(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``bodies.bin`` (one document's, or a merge's run of them)."""
        if not 0 <= start <= end <= self._bodies_size:
            raise SearchIndexError(f"{self.path}: stored body pointers beyond bodies.bin")
        data = os.pread(self._bodies_fd, end - start, start)
        if len(data) != end - start:
            raise SearchIndexError(f"{self.path}: bodies.bin is shorter than its pointers")
        return data

    def body(self, doc: int) -> str:
        """Stored body text, decompressed whole."""
        stops = self.sync_points(doc)[:, 0].tolist()
        return open_body(self.body_buffer(doc), self.body_codec, stops=stops).whole()

    def documents(self, doc_ids: Iterable[int]) -> Iterator[tuple[str, str, str]]:
        for d in doc_ids:
            yield self.urls[d], self.titles[d], self.body(d)

    def site_mask(self, site: str) -> np.ndarray:
        """Per document: whether its URL's host is ``site`` or a subdomain of it (a leading
        ``www.`` ignored), kept for the last few sites asked for."""
        mask = self._site_masks.get(site)
        if mask is None:
            hosts = self.hosts()
            suffix = "." + site
            mask = np.fromiter((h == site or h.endswith(suffix) for h in hosts), dtype=bool, count=len(hosts))
            if len(self._site_masks) >= 8:
                self._site_masks.pop(next(iter(self._site_masks)))
            self._site_masks[site] = mask
        return mask

    def facets(self) -> DocFacets:
        """The documents' sites, kinds, languages and dates as codes (computed once, on first use)."""
        if self._facets is None:
            self._facets = DocFacets(self.meta, self.hosts(), self.doc_count)
        return self._facets

    def hosts(self) -> list[str]:
        """Lower-cased URL host per document, a leading ``www.`` left out (computed once, on
        first use: the first filtered, ``site:`` or grouped query of a segment waits for it)."""
        if self._hosts is None:
            one: dict[str, str] = {}  # one string per host, not one per document
            self._hosts = [one.setdefault(h, h) for h in map(_url_host, self.urls)]
        return self._hosts


def _url_host(url: str) -> str:
    """``url``'s host as ``urllib.parse.urlsplit(url).hostname`` gives it ("" for none, or a URL
    it cannot read), without a trailing dot or a leading ``www.``."""
    m = _PLAIN_HOST.match(url)
    if m is not None:
        host = m.group(1)
    else:
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:
            host = ""
    host = host.rstrip(".")
    return host[4:] if host.startswith("www.") else host
