"""Duplicate detection: exact content keys, SimHash, near-duplicate lookup. Pure.

* :func:`text_fingerprint` -- exact-duplicate key: BLAKE2b-128 of the text
  after NFKC normalization, case folding and whitespace collapsing, so two
  pages that differ only in layout whitespace or case share a key.
* :func:`simhash` -- Charikar's SimHash (64 bits) over word shingles: texts
  that share most shingles have fingerprints a few bits apart.
* :class:`SimHashIndex` -- "is there a fingerprint within k bits of this
  one?" without scanning every fingerprint (Manku, Jain, Das Sarma, *Detecting
  near-duplicates for web crawling*, WWW 2007): split the 64 bits into k+1
  blocks; by the pigeonhole principle two fingerprints at distance <= k agree
  exactly on at least one block, so only fingerprints sharing a block value
  are candidates, and each candidate is checked with a popcount.

Fingerprints are unsigned 64-bit ints (``0 <= fp < 2**64``). SQLite and
PostgreSQL integers are *signed* 64-bit: store ``to_signed64(fp)`` and read
back with ``from_signed64(value)``.
"""

from __future__ import annotations

import hashlib
import itertools
import string
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from typing import cast

import numpy as np

__all__ = [
    "SimHashIndex",
    "from_signed64",
    "hamming",
    "simhash",
    "text_fingerprint",
    "to_signed64",
]

_U64 = 1 << 64
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1

# Words for SimHash, one 256-byte bytes.translate table: ASCII punctuation becomes a space
# (it separates words like whitespace) and A-Z become a-z. UTF-8 multi-byte sequences use only
# bytes >= 0x80, so they pass through untouched; words holding such bytes are case-folded
# one distinct word at a time (see _word_digest).
_WORD_TABLE = bytes(0x20 if chr(b) in string.punctuation else b + 0x20 if 0x41 <= b <= 0x5A else b for b in range(256))

# For text_fingerprint, one table: the ASCII whitespace of str.split() (\t \n \v \f \r,
# \x1c-\x1f) becomes a space, and A-Z become a-z (case folding, for ASCII).
_FOLD_SPACE_TABLE = bytes(
    0x20 if chr(b).isspace() else b + 0x20 if 0x41 <= b <= 0x5A else b for b in range(128)
) + bytes(range(128, 256))
# The non-ASCII whitespace that can occur in NFKC-normalized text: every other one (U+00A0,
# U+2000-U+200A, U+202F, U+205F, U+3000) has a compatibility or singleton decomposition, so
# NFKC never outputs it; case folding neither makes nor unmakes whitespace (both checked
# against unicodedata in tests/unit/test_dedup.py).
_NFKC_WIDE_SPACES = ("\x85", "\u1680", "\u2028", "\u2029")


def _canonical_text(text: str) -> str:
    # NFKC folds compatibility forms (ligatures, fullwidth); casefold is the
    # Unicode-complete lowercase ("Straße" == "STRASSE").
    if not unicodedata.is_normalized("NFKC", text):  # quick check: most pages are already NFKC
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


def _folded_utf8(text: str) -> bytes | None:
    """``_canonical_text(text)`` as UTF-8 (surrogatepass) with ASCII whitespace made
    spaces, or None when the text holds non-ASCII whitespace.

    Case folding maps each character on its own, so the ASCII bytes are folded by one
    bytes.translate and only the runs of non-ASCII bytes (whole UTF-8 sequences: ASCII bytes
    never occur inside one) go through str.casefold -- unless there are many such runs.
    """
    if text.isascii():
        return text.encode("ascii").translate(_FOLD_SPACE_TABLE)
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    if any(space in text for space in _NFKC_WIDE_SPACES):
        return None
    data = text.encode("utf-8", "surrogatepass")
    high = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) >= 0x80)
    if not len(high):  # NFKC made it ASCII ("ﬁ" -> "fi")
        return data.translate(_FOLD_SPACE_TABLE)
    gaps = np.flatnonzero(np.diff(high) != 1)
    if len(gaps) * 64 >= len(data):  # mostly non-ASCII: one casefold of the whole text
        return text.casefold().encode("utf-8", "surrogatepass").translate(_FOLD_SPACE_TABLE)
    data = data.translate(_FOLD_SPACE_TABLE)
    starts = [high.item(0), *(high[gaps + 1].tolist())]
    ends = [*(high[gaps] + 1).tolist(), high.item(-1) + 1]
    pieces = []
    done = 0
    for start, end in zip(starts, ends):
        run = data[start:end]
        folded = run.decode("utf-8", "surrogatepass").casefold().encode("utf-8", "surrogatepass")
        if folded != run:
            pieces.append(data[done:start])
            pieces.append(folded)
            done = end
    if not done:
        return data
    pieces.append(data[done:])
    return b"".join(pieces)


def text_fingerprint(text: str) -> str:
    """Exact-duplicate key: 32 hex digits (BLAKE2b, 16 bytes).

    Equal for texts that differ only in Unicode normalization form, case, or
    the amount and kind of whitespace.
    """
    # The key hashes " ".join(_canonical_text(text).split()) as UTF-8. Without non-ASCII
    # whitespace, that is the folded UTF-8 with runs of spaces squeezed and the ends stripped:
    # C-level bytes operations instead of a str object per word (~3x faster on a 20 KB page).
    data = _folded_utf8(text)
    if data is not None:
        while b"  " in data:  # each pass halves every run of spaces
            data = data.replace(b"  ", b" ")
        data = data.strip(b" ")
    else:
        # surrogatepass: a lone surrogate from a broken page must not raise.
        data = " ".join(_canonical_text(text).split()).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# Cache of word -> 8-byte BLAKE2b digest of its case-folded form, shared across calls: the
# frequent words of a crawl repeat on every page, and hashing each distinct word (~0.4 us a
# call) was the largest cost. Bounded: emptied when full (~4 MiB); long words are not kept.
_WORD_DIGESTS: dict[bytes, bytes] = {}
_WORD_CACHE_SIZE = 1 << 15
_WORD_CACHE_MAX_LEN = 32


def _word_digest(word: bytes) -> bytes:
    """BLAKE2b-64 of a word (ASCII already lower-cased) after case folding."""
    if not word.isascii():
        # Case folding maps each character on its own and never yields ASCII punctuation or
        # whitespace, so folding word by word equals folding the whole text first.
        word = word.decode("utf-8", "surrogatepass").casefold().encode("utf-8", "surrogatepass")
    return hashlib.blake2b(word, digest_size=8).digest()


def _word_digests(vocabulary: list[bytes]) -> bytes:
    """The concatenated digests of the distinct ``vocabulary`` words, in order."""
    cache = _WORD_DIGESTS
    digests = list(map(cache.get, vocabulary))
    if None in digests:
        for i, digest in enumerate(digests):
            if digest is None:
                word = vocabulary[i]
                digests[i] = digest = _word_digest(word)
                if len(word) <= _WORD_CACHE_MAX_LEN:
                    if len(cache) >= _WORD_CACHE_SIZE:
                        cache.clear()
                    cache[word] = digest
    return b"".join(cast("list[bytes]", digests))  # every None was just filled in


def simhash(text: str, *, shingle: int = 3) -> int:
    """64-bit SimHash of ``text`` over ``shingle``-word shingles.

    Words are the runs of the NFKC-normalized, case-folded text (as UTF-8) separated by
    whitespace or ASCII punctuation (``string.punctuation``). Each
    distinct word is hashed once with BLAKE2b-64; a shingle's hash combines
    its word hashes in order (``h = h * K ^ next``, wrapping) and finishes
    with the SplitMix64 mixer, all vectorized with numpy. Bit *i* of the
    result is set when more than half of the shingles (counted with
    repetition) have bit *i* set. A text shorter than one shingle is a single
    shingle; a text with no words hashes to 0.

    Stored fingerprints depend on this exact definition: changing it means
    recomputing them. (Measured by benchmarks/bench_dedup.py on ~20 KB texts
    with Zipfian word frequencies: 1.3 ms per text, vs 3.3 ms when every
    shingle is hashed with BLAKE2b -- hashing dominated that version. Later,
    with the same output: word digests cached across calls, a one-pass
    vocabulary, per-word case folding and SWAR bit counting took it from 0.60
    to 0.36 ms per bench_hosts page; see ``--per-page`` in that benchmark.)
    """
    if shingle < 1:
        raise ValueError(f"shingle must be >= 1, got {shingle}")
    if not text.isascii() and not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    # Words: one C-level bytes.translate (punctuation -> space, ASCII lower case), then
    # bytes.split — ~10x faster than a Unicode \w+ regex on a 20 KB page (0.06 vs 0.6 ms
    # measured). Non-ASCII words are case-folded in _word_digest, once per distinct word.
    words = text.encode("utf-8", "surrogatepass").translate(_WORD_TABLE).split()
    if not words:
        return 0
    # Word -> id in first-seen order, in one pass (a missing key takes the next id).
    vocabulary: defaultdict[bytes, int] = defaultdict(itertools.count().__next__)
    sequence = np.fromiter(map(vocabulary.__getitem__, words), dtype=np.intp, count=len(words))
    word_hashes = np.frombuffer(_word_digests(list(vocabulary)), dtype="<u8")
    hashes = word_hashes[sequence]
    count = max(1, len(hashes) - shingle + 1)
    # Shingle hashes, zero-padded to a multiple of 255 rows for the bit counting below
    # (a zero hash has no bits set, so the padding counts nothing).
    padded = np.zeros(count + (-count) % 255, dtype=np.uint64)
    acc = padded[:count]
    acc[:] = hashes[:count]
    for j in range(1, min(shingle, len(hashes))):
        acc *= _SHINGLE_K  # uint64 arithmetic wraps modulo 2**64
        acc ^= hashes[j : j + count]
    _splitmix64(acc)
    # Bit counting: the little-endian bytes unpacked give 64 bytes of 0/1 per hash, byte j
    # being bit j. Viewed as 8 uint64 "lanes" of 8 byte counters each, 255 hashes are added
    # in one uint64 add per lane without a counter carrying into the next byte (SWAR);
    # then the per-byte partial counts are summed exactly.
    bits = np.unpackbits(padded.astype("<u8", copy=False).view(np.uint8), bitorder="little")
    lanes = np.add.reduce(bits.view(np.uint64).reshape(255, -1), axis=0)
    counts = np.add.reduce(lanes.view(np.uint8).reshape(-1, 64), axis=0, dtype=np.int64)
    majority = counts * 2 > count
    return int.from_bytes(np.packbits(majority, bitorder="little").tobytes(), "little")


# Odd multiplier (2**64 / golden ratio) for combining word hashes in order.
_SHINGLE_K = np.uint64(0x9E3779B97F4A7C15)
_SM_30, _SM_27, _SM_31 = np.uint64(30), np.uint64(27), np.uint64(31)
_SM_M1, _SM_M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> None:
    """SplitMix64 finalizer (Steele, Lea, Flood 2014), in place on a uint64
    array: every input bit affects every output bit, so shingle hashes have
    independent bits."""
    x ^= x >> _SM_30
    x *= _SM_M1
    x ^= x >> _SM_27
    x *= _SM_M2
    x ^= x >> _SM_31


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints."""
    return (a ^ b).bit_count()


def to_signed64(fp: int) -> int:
    """Map an unsigned 64-bit fingerprint to the signed range of SQL BIGINT."""
    if not 0 <= fp < _U64:
        raise ValueError(f"not an unsigned 64-bit value: {fp}")
    return fp - _U64 if fp > _I64_MAX else fp


def from_signed64(value: int) -> int:
    """Inverse of :func:`to_signed64`."""
    if not _I64_MIN <= value <= _I64_MAX:
        raise ValueError(f"not a signed 64-bit value: {value}")
    return value & (_U64 - 1)


def _check_fp(fp: int) -> int:
    if not 0 <= fp < _U64:
        raise ValueError(f"fingerprint must be an unsigned 64-bit int, got {fp}")
    return fp


if hasattr(np, "bitwise_count"):  # numpy >= 2.0

    def _popcount(values: np.ndarray) -> np.ndarray:
        counts: np.ndarray = np.bitwise_count(values)
        return counts

else:  # numpy 1.26: byte lookup table
    _BYTE_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

    def _popcount(values: np.ndarray) -> np.ndarray:
        as_bytes = np.ascontiguousarray(values).view(np.uint8).reshape(-1, 8)
        counts: np.ndarray = _BYTE_POPCOUNT[as_bytes].sum(axis=1, dtype=np.uint8)
        return counts


def _rows_of(bucket: int | list[int] | None) -> Iterable[int]:
    if bucket is None:
        return ()
    return (bucket,) if isinstance(bucket, int) else bucket


class SimHashIndex:
    """Near-duplicate lookup over 64-bit fingerprints (pigeonhole on k+1 blocks).

    Layout: the bulk lives in numpy arrays -- one ``fps``/``ids``/``alive``
    row per entry, plus, for every block position *p*, the key
    ``p << W | block_p(fp)`` of each entry in one sorted array with the row it
    belongs to (``keys``/``rows``), and, when small enough, a direct-address
    table from key to its span in ``keys`` (else binary search). A lookup
    reads k+1 spans and does one vectorized XOR + popcount over the
    candidates: about 4 * n / 2**16 of them for k=3. About 40 bytes per entry
    for k=3 (vs ~150 for Python dicts of tuples).

    New entries go to a small Python-dict buffer, merged into the arrays when
    it reaches a quarter of the arrays' size (amortized O(log n) per add).
    Removal marks the row dead; dead rows are dropped at the next merge.
    Entries form a multiset: adding the same (doc_id, fp) twice needs two
    removes. Built for small k (the default 3): at k >= 8 blocks get so short
    that most entries are candidates.
    """

    _MIN_BUFFER = 4096

    def __init__(self, max_distance: int = 3) -> None:
        if not 0 <= max_distance < 64:
            raise ValueError(f"max_distance must be in 0..63, got {max_distance}")
        self.max_distance = max_distance
        nblocks = max_distance + 1
        base, extra = divmod(64, nblocks)
        self._blocks: list[tuple[int, int]] = []  # (shift, mask) per position
        shift = 0
        for p in range(nblocks):
            width = base + (1 if p < extra else 0)
            self._blocks.append((shift, (1 << width) - 1))
            shift += width
        self._key_shift = base + (1 if extra else 0)
        key_bits = self._key_shift + (nblocks - 1).bit_length()
        self._key_dtype = np.uint32 if key_bits <= 32 else np.uint64
        # bulk (numpy)
        self._fps = np.empty(0, dtype=np.uint64)
        self._ids = np.empty(0, dtype=np.int64)
        self._alive = np.empty(0, dtype=bool)
        self._keys = np.empty(0, dtype=self._key_dtype)
        self._rows = np.empty(0, dtype=np.int32)
        self._offsets: np.ndarray | None = None
        self._bulk_live = 0
        # buffer (Python)
        self._buf_fps: list[int] = []
        self._buf_ids: list[int | None] = []  # None = removed
        # block value -> row, or list of rows when shared (a list per entry
        # would cost ~350 bytes each)
        self._buf_index: list[dict[int, int | list[int]]] = [{} for _ in range(nblocks)]
        self._buf_live = 0

    def __len__(self) -> int:
        return self._bulk_live + self._buf_live

    def _block_values(self, fp: int) -> list[int]:
        return [(fp >> shift) & mask for shift, mask in self._blocks]

    # -- updates -----------------------------------------------------------

    def add(self, doc_id: int, fp: int) -> None:
        """Index ``fp`` for ``doc_id``."""
        _check_fp(fp)
        row = len(self._buf_fps)
        self._buf_fps.append(fp)
        self._buf_ids.append(doc_id)
        for index, value in zip(self._buf_index, self._block_values(fp)):
            bucket = index.get(value)
            if bucket is None:
                index[value] = row
            elif isinstance(bucket, int):
                index[value] = [bucket, row]
            else:
                bucket.append(row)
        self._buf_live += 1
        if len(self._buf_fps) >= max(self._MIN_BUFFER, len(self._fps) // 4):
            self._merge()

    def add_many(self, doc_ids: Iterable[int], fps: Iterable[int]) -> None:
        """Bulk :meth:`add` (e.g. loading from the store): one merge, no buffer."""
        ids = np.asarray(list(doc_ids) if not isinstance(doc_ids, np.ndarray) else doc_ids, dtype=np.int64)
        if isinstance(fps, np.ndarray) and fps.dtype == np.uint64:
            new_fps = fps
        else:
            fp_list = [_check_fp(int(fp)) for fp in fps]
            new_fps = np.array(fp_list, dtype=np.uint64)
        if ids.shape != new_fps.shape or ids.ndim != 1:
            raise ValueError("doc_ids and fps must be 1-d and of equal length")
        self._merge(extra=(new_fps, ids))

    def remove(self, doc_id: int, fp: int) -> None:
        """Remove one (doc_id, fp) entry; a no-op if there is none."""
        _check_fp(fp)
        shift, mask = self._blocks[0]
        for row in _rows_of(self._buf_index[0].get((fp >> shift) & mask)):
            if self._buf_ids[row] == doc_id and self._buf_fps[row] == fp:
                self._buf_ids[row] = None
                self._buf_live -= 1
                return
        if not len(self._fps):
            return
        key = self._key_dtype((fp >> shift) & mask)  # position 0: no prefix
        lo = int(np.searchsorted(self._keys, key, "left"))
        hi = int(np.searchsorted(self._keys, key, "right"))
        rows = self._rows[lo:hi]
        hit = np.flatnonzero((self._fps[rows] == np.uint64(fp)) & (self._ids[rows] == doc_id) & self._alive[rows])
        if len(hit):
            self._alive[rows[hit[0]]] = False
            self._bulk_live -= 1
            if len(self._fps) - self._bulk_live > max(self._MIN_BUFFER, self._bulk_live):
                self._merge()  # more dead rows than live ones: compact

    def _merge(self, extra: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Rebuild the arrays from live bulk rows + live buffer (+ ``extra``)."""
        fps_parts = [self._fps[self._alive]]
        ids_parts = [self._ids[self._alive]]
        live = [i for i, doc_id in enumerate(self._buf_ids) if doc_id is not None]
        if live:
            fps_parts.append(np.array([self._buf_fps[i] for i in live], dtype=np.uint64))
            ids_parts.append(np.array([self._buf_ids[i] for i in live], dtype=np.int64))
        if extra is not None:
            fps_parts.append(extra[0])
            ids_parts.append(extra[1])
        fps = np.concatenate(fps_parts)
        ids = np.concatenate(ids_parts)
        n = len(fps)
        keys = np.empty(n * len(self._blocks), dtype=self._key_dtype)
        for p, (shift, mask) in enumerate(self._blocks):
            block = (fps >> np.uint64(shift)) & np.uint64(mask)
            keys[p * n : (p + 1) * n] = block | np.uint64(p << self._key_shift)
        order = np.argsort(keys)
        row_dtype = np.int32 if n < 2**31 else np.int64
        self._fps, self._ids = fps, ids
        self._alive = np.ones(n, dtype=bool)
        self._keys = keys[order]
        self._rows = (order % n).astype(row_dtype) if n else np.empty(0, dtype=row_dtype)
        # Direct-address table key -> first position in ``keys`` when it is
        # small (k=3: 4 * 2**16 + 1 entries, 2 MiB): one lookup instead of a
        # binary search with a cache miss per step.
        table = len(self._blocks) << self._key_shift
        if table <= max(1 << 18, 2 * len(self._keys)):
            counts = np.bincount(self._keys, minlength=table)
            self._offsets = np.zeros(table + 1, dtype=np.int64)
            np.cumsum(counts, out=self._offsets[1:])
        else:
            self._offsets = None
        self._bulk_live = n
        self._buf_fps, self._buf_ids = [], []
        self._buf_index = [{} for _ in self._blocks]
        self._buf_live = 0

    # -- lookups -----------------------------------------------------------

    def _bulk_candidates(self, fp: int, values: list[int]) -> dict[int, int]:
        """row -> distance of live bulk rows within max_distance."""
        if not len(self._fps):
            return {}
        shift = self._key_shift
        keys = [(p << shift) | v for p, v in enumerate(values)]
        if self._offsets is not None:
            offset = self._offsets.item
            spans: Iterable[tuple[int, int]] = [(offset(key), offset(key + 1)) for key in keys]
        else:
            query = np.array(keys, dtype=self._key_dtype)
            spans = zip(
                np.searchsorted(self._keys, query, "left").tolist(),
                np.searchsorted(self._keys, query, "right").tolist(),
            )
        parts = [self._rows[lo:hi] for lo, hi in spans if hi > lo]
        if not parts:
            return {}
        rows = parts[0] if len(parts) == 1 else np.concatenate(parts)
        dist = _popcount(self._fps[rows] ^ np.uint64(fp))
        hits = np.flatnonzero(dist <= self.max_distance)
        if not len(hits):  # the common case: no near-duplicate
            return {}
        # A row can be found through several blocks; the dict keeps it once.
        if len(hits) > 16:  # many copies of one page: stay vectorized
            rows, dist = rows[hits], dist[hits]
            keep = self._alive[rows]
            return dict(zip(rows[keep].tolist(), dist[keep].tolist()))
        # Few hits: finish with scalar reads, cheaper than more numpy calls.
        alive = self._alive.item
        found = {}
        for i in hits.tolist():
            row = rows.item(i)
            if alive(row):
                found[row] = dist.item(i)
        return found

    def _buffer_candidates(self, fp: int, values: list[int]) -> dict[int, tuple[int, int]]:
        """row -> (doc_id, distance) of live buffer rows within max_distance."""
        found: dict[int, tuple[int, int]] = {}
        if not self._buf_live:
            return found
        for index, value in zip(self._buf_index, values):
            for row in _rows_of(index.get(value)):
                doc_id = self._buf_ids[row]
                if doc_id is not None:
                    dist = (fp ^ self._buf_fps[row]).bit_count()
                    if dist <= self.max_distance:
                        found[row] = (doc_id, dist)
        return found

    def find_near(self, fp: int) -> int | None:
        """The doc_id of the closest fingerprint within max_distance (ties: the
        smallest doc_id), or None."""
        _check_fp(fp)
        values = self._block_values(fp)
        best: tuple[int, int] | None = None  # (distance, doc_id)
        doc_of = self._ids.item
        for row, dist in self._bulk_candidates(fp, values).items():
            candidate = (dist, doc_of(row))
            if best is None or candidate < best:
                best = candidate
        for doc_id, dist in self._buffer_candidates(fp, values).values():
            if best is None or (dist, doc_id) < best:
                best = (dist, doc_id)
        return None if best is None else best[1]

    def find_all(self, fp: int) -> list[tuple[int, int]]:
        """Every (doc_id, distance) within max_distance, nearest first."""
        _check_fp(fp)
        values = self._block_values(fp)
        found: list[tuple[int, int]] = []
        doc_of = self._ids.item
        found.extend((doc_of(row), dist) for row, dist in self._bulk_candidates(fp, values).items())
        found.extend(self._buffer_candidates(fp, values).values())
        found.sort(key=lambda item: (item[1], item[0]))
        return found

    def nbytes(self) -> int:
        """Bytes held by the numpy arrays (the buffer's Python objects excluded)."""
        return sum(a.nbytes for a in (self._fps, self._ids, self._alive, self._keys, self._rows))
