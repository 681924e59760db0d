"""Duplicate detection: exact content keys, SimHash. Pure.

* :func:`text_fingerprint` -- exact-duplicate key: BLAKE2b-128 of the text
  after NFKC normalization, case folding and whitespace collapsing, so two
  pages that differ only in layout whitespace or case share a key.
* :func:`simhash` -- Charikar's SimHash (64 bits) over word shingles: texts
  that share most shingles have fingerprints a few bits apart.

The near-duplicate lookup itself is the store's (four 16-bit block indexes of
the SimHash, the pigeonhole of Manku, Jain and Das Sarma, WWW 2007): two
fingerprints within ``NEAR_DISTANCE`` (3) bits agree exactly on at least one block.

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
from typing import TYPE_CHECKING, cast

from . import compiled

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "NEAR_DISTANCE",
    "from_signed64",
    "hamming",
    "simhash",
    "text_fingerprint",
    "to_signed64",
]

#: Two SimHashes at most this many bits apart are near-duplicates (Manku et al. 2007: k = 3 of
#: 64 bits). The store's lookup relies on it being below four: a fingerprint within it agrees
#: with the other on at least one of four 16-bit blocks.
NEAR_DISTANCE = 3

# The per-word loop of simhash and the space squeezing of text_fingerprint, compiled (_dedup.c,
# optional: see .compiled; without it the numpy and bytes code below runs, with the same results).
# Read at call time, so a test can set them to None.
_compiled_simhash = compiled.simhash
_compiled_squeeze = compiled.squeeze_spaces

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


#: The ASCII bytes, for bytes.translate(None, ...) to delete.
_ASCII_BYTES = bytes(range(0x80))


def _folded_utf8(text: str) -> bytes | None:
    """``_canonical_text(text)`` as UTF-8 (surrogatepass) with ASCII whitespace made
    spaces, or None when the text holds non-ASCII whitespace.

    Case folding maps each character on its own, so the ASCII bytes are folded by one
    bytes.translate; when every distinct non-ASCII character is its own case fold (curly
    quotes, dashes, lower-case accented letters, CJK: most pages' non-ASCII text), that is
    all. Otherwise the whole text goes through str.casefold once. The non-ASCII characters
    are found with the ASCII bytes deleted, all in C (a regex over the bytes took ~20 ns a
    byte, and numpy cost each worker ~16 MB just to import).
    """
    if text.isascii():
        return text.encode("ascii").translate(_FOLD_SPACE_TABLE)
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    if any(space in text for space in _NFKC_WIDE_SPACES):
        return None
    data = text.encode("utf-8", "surrogatepass")
    # UTF-8 sequences hold no ASCII byte: what the deletion leaves is the non-ASCII characters.
    high = data.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")
    if all(ch.casefold() == ch for ch in set(high)):  # also when NFKC made it ASCII ("ﬁ" -> "fi")
        return data.translate(_FOLD_SPACE_TABLE)
    return text.casefold().encode("utf-8", "surrogatepass").translate(_FOLD_SPACE_TABLE)


def text_fingerprint(text: str) -> str:
    """Exact-duplicate key: 32 hex digits (BLAKE2b, 16 bytes).

    Equal for texts that differ only in Unicode normalization form, case, or
    the amount and kind of whitespace.
    """
    # The key hashes " ".join(_canonical_text(text).split()) as UTF-8. Without non-ASCII
    # whitespace, that is the folded UTF-8 with runs of spaces squeezed and the ends stripped:
    # C-level bytes operations instead of a str object per word (~3x faster on a 20 KB page).
    # The squeezing in one C pass where _dedup.c is built: ~65 -> ~45 us per bench_hosts page
    # (bench_dedup.py --per-page); a search for "  " alone took ~30 us.
    data = _folded_utf8(text)
    if data is not None:
        squeeze = _compiled_squeeze
        if squeeze is not None:
            data = squeeze(data)
        else:
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
# The numpy code's: the C loop keeps its own, with the same bounds, in C (_dedup.c).
_WORD_DIGESTS: dict[bytes, bytes] = {}
_WORD_CACHE_SIZE = 1 << 15
_WORD_CACHE_MAX_LEN = 32


def _word_digest(word: bytes) -> bytes:
    """BLAKE2b-64 of a word (ASCII already lower-cased) after case folding.

    Also the C loop's (_dedup.c): it calls this back for each word it has not cached."""
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
    ASCII whitespace (what ``bytes.split()`` splits on: space, ``\t \n \v \f \r``) or ASCII
    punctuation (``string.punctuation``). Each
    distinct word is hashed once with BLAKE2b-64; a shingle's hash combines
    its word hashes in order (``h = h * K ^ next``, wrapping) and finishes
    with the SplitMix64 mixer. Bit *i* of the
    result is set when more than half of the shingles (counted with
    repetition) have bit *i* set. A text shorter than one shingle is a single
    shingle; a text with no words hashes to 0. After the words' bytes are made,
    the rest runs in C (``_dedup.c``) where it is built, else vectorized with numpy
    (:func:`_simhash_numpy`, the reference): the same value either way.

    Stored fingerprints depend on this exact definition: changing it means
    recomputing them. (Measured by benchmarks/bench_dedup.py on ~20 KB texts
    with Zipfian word frequencies: 1.3 ms per text, vs 3.3 ms when every
    shingle is hashed with BLAKE2b -- hashing dominated that version. Later,
    with the same output: word digests cached across calls, a one-pass
    vocabulary, per-word case folding and SWAR bit counting took it from 0.60
    to 0.36 ms per bench_hosts page; the per-word loop in C then took it to
    about 0.085 ms (0.50 to 0.14 ms with one word in eight non-ASCII): numbers from
    ``bench_dedup.py --per-page --baseline 114ed9e``, which times the C and numpy
    code in one run.)
    """
    if shingle < 1:
        raise ValueError(f"shingle must be >= 1, got {shingle}")
    if not text.isascii() and not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    # Words: one C-level bytes.translate (punctuation -> space, ASCII lower case), then split on
    # ASCII whitespace. Non-ASCII words are case-folded in _word_digest, once per distinct word.
    data = text.encode("utf-8", "surrogatepass").translate(_WORD_TABLE)
    compiled = _compiled_simhash
    if compiled is not None:
        # The rest in C, same definition (_dedup.c): words split without an object each, digests
        # from its own cache, _word_digest called back for a word it has not seen.
        return compiled(data, shingle, _word_digest)
    return _simhash_numpy(data, shingle)


def _simhash_numpy(data: bytes, shingle: int) -> int:
    """simhash from its translated UTF-8 ``data``, with numpy: the reference of _dedup.c's and
    the fallback where it is not built."""
    # Imported here: a crawl's workers, which run the compiled loop, never load numpy (~16 MB each).
    import numpy as np

    # bytes.split — ~10x faster than a Unicode \w+ regex on a 20 KB page (0.06 vs 0.6 ms measured).
    words = data.split()
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
        acc *= np.uint64(_SHINGLE_K)  # uint64 arithmetic wraps modulo 2**64
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
_SHINGLE_K = 0x9E3779B97F4A7C15


def _splitmix64(x: np.ndarray) -> None:
    """SplitMix64 finalizer (Steele, Lea, Flood 2014), in place on a uint64
    array: every input bit affects every output bit, so shingle hashes have
    independent bits."""
    import numpy as np

    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)


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
