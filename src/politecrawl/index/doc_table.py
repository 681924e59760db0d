"""A segment's per-document strings (its URLs, its titles) as one UTF-8 blob and where each ends.

Format 4 of a segment (``segment``) stores each as two files, ``<name>.bin`` (the strings'
UTF-8 bytes, concatenated, lone surrogates kept with ``surrogatepass``) and ``<name>.end.npy``
(per document where its string ends in the blob: the smallest of uint32/uint64 that holds the
blob's size; a string starts where the one before ends).  The blob is memory-mapped and a
string decoded when asked for: held as Python lists (``docs.json`` of formats 2 and 3) the URLs
and titles of a million pages were most of a searching process's own memory.

The compiled ``rank`` compares two URLs by their bytes: UTF-8 (with ``surrogatepass``) orders as
code points do, which is how Python compares the strings the numpy code sorts.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator
from pathlib import Path
from tokenize import TokenError
from typing import SupportsIndex

import numpy as np

from politecrawl.errors import SearchIndexError

__all__ = ["TextTable", "encode_strings"]


def encode_strings(strings: Iterable[str]) -> tuple[bytes, np.ndarray]:
    """The blob and the ends of ``strings`` (what ``<name>.bin`` and ``<name>.end.npy`` hold)."""
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    ends = np.cumsum(sizes, dtype=np.int64)
    top = int(ends[-1]) if len(ends) else 0
    return b"".join(encoded), ends.astype(np.uint32 if top < 2**32 else np.uint64)


class TextTable:
    """The strings of one segment's documents, by local doc id: ``table[doc]`` decodes one,
    iterating decodes them all (merges, ``politecrawl check``)."""

    __slots__ = ("blob", "ends", "_mv", "_ends")

    def __init__(self, blob: np.ndarray, ends: np.ndarray):
        #: the UTF-8 bytes (uint8) and where each string ends in them, as the kernels take them
        self.blob, self.ends = blob, ends
        self._mv = blob.data
        # Indexing a memoryview gives a Python int at once, where a numpy array makes a scalar
        # object first: this is read for every hit's URL and title.
        self._ends = np.ascontiguousarray(ends, dtype=ends.dtype.newbyteorder("=")).data

    @classmethod
    def from_strings(cls, strings: Iterable[str]) -> TextTable:
        """A table held in memory (segments of formats 2 and 3, whose strings are in ``docs.json``)."""
        data, ends = encode_strings(strings)
        return cls(np.frombuffer(data, dtype=np.uint8), ends)

    @classmethod
    def load(cls, seg_dir: Path, name: str, n_docs: int) -> TextTable:
        """``<name>.bin`` memory-mapped and ``<name>.end.npy`` of a segment of ``n_docs`` documents,
        checked against each other (SearchIndexError if they do not match)."""
        path = seg_dir / f"{name}.bin"
        try:
            size = path.stat().st_size
            blob = np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray) if size else np.zeros(0, np.uint8)
            ends = np.load(seg_dir / f"{name}.end.npy", mmap_mode="r", allow_pickle=False).view(np.ndarray)
        except FileNotFoundError:
            raise
        except (OSError, ValueError, SyntaxError, TokenError) as exc:  # numpy parses the header as Python
            raise SearchIndexError(f"corrupt segment file {path}: {exc}") from exc
        last = int(ends[-1]) if len(ends) else 0
        if ends.ndim != 1 or len(ends) != n_docs or ends.dtype.kind != "u" or last != size:
            raise SearchIndexError(f"{seg_dir}: {name} do not match the documents")
        return cls(blob, ends)

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, index: SupportsIndex) -> str:
        ends = self._ends
        doc = operator.index(index)
        if doc < 0:
            doc += len(ends)
        end = ends[doc]
        start = ends[doc - 1] if doc else 0
        if not 0 <= start <= end <= len(self.blob):
            raise SearchIndexError(f"document strings out of order at {doc}")
        try:
            return str(self._mv[start:end], "utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise SearchIndexError(f"document string {doc} is damaged: {exc}") from exc

    def __iter__(self) -> Iterator[str]:
        data = bytes(self.blob)
        start = 0
        for end in self.ends.tolist():
            if end < start:
                raise SearchIndexError("document strings out of order")
            try:
                text = data[start:end].decode("utf-8", "surrogatepass")
            except UnicodeDecodeError as exc:
                raise SearchIndexError(f"document strings are damaged: {exc}") from exc
            yield text
            start = end
