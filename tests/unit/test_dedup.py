"""Tests for politecrawl.content.dedup: fingerprints and SimHash (the near-duplicate lookup is the store's)."""

from __future__ import annotations

import importlib.util
import os
import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from politecrawl.content import dedup
from politecrawl.content.dedup import (
    from_signed64,
    hamming,
    simhash,
    text_fingerprint,
    to_signed64,
)

U64 = 2**64

compiled_built = dedup._compiled_simhash is not None
needs_compiled = pytest.mark.skipif(
    not compiled_built, reason="politecrawl.content._dedup is not built (no C compiler)"
)


@pytest.fixture(params=["compiled", "numpy"])
def implementation(request, monkeypatch):
    """Runs a test with the compiled loops (_dedup.c) and again with the numpy and bytes code."""
    if request.param == "numpy":
        monkeypatch.setattr(dedup, "_compiled_simhash", None)
        monkeypatch.setattr(dedup, "_compiled_squeeze", None)
    elif not compiled_built:
        pytest.skip("politecrawl.content._dedup is not built (no C compiler)")
    return request.param


# --------------------------------------------------------------------------
# text_fingerprint
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Hello world", "hello   WORLD"),
        ("Hello world", "  hello\n\tworld \r\n"),
        ("a b", "a\u00a0b"),  # no-break space is whitespace
        ("ﬁne", "fine"),  # NFKC ligature
        ("Ｗｉｄｅ", "wide"),  # fullwidth
        ("Straße", "STRASSE"),  # case folding, not just lower()
        ("café", "cafe\u0301"),  # composed vs decomposed
    ],
)
def test_fingerprint_equal(a, b):
    assert text_fingerprint(a) == text_fingerprint(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Hello world", "Hello world!"),
        ("Hello world", "Helloworld"),
        ("a b c", "a c b"),
        ("", "x"),
    ],
)
def test_fingerprint_different(a, b):
    assert text_fingerprint(a) != text_fingerprint(b)


def test_fingerprint_shape():
    fp = text_fingerprint("anything")
    assert len(fp) == 32 and int(fp, 16) >= 0
    assert text_fingerprint("broken \ud800 text")  # lone surrogate does not raise


# --------------------------------------------------------------------------
# simhash
# --------------------------------------------------------------------------


def _article(seed: int, words: int = 400) -> str:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(5000)]
    return " ".join(rng.choice(vocabulary) for _ in range(words))


def test_simhash_is_64_bit_and_deterministic():
    text = _article(1)
    assert simhash(text) == simhash(text)
    assert 0 <= simhash(text) < U64
    assert simhash("") == 0
    assert simhash("  ,.;  ") == 0


def test_simhash_ignores_case_whitespace_and_punctuation():
    assert simhash("The quick brown fox, jumps!") == simhash("the QUICK\n brown   fox jumps")


def _edits(words: list[str]) -> list[list[str]]:
    """Typical near-duplicate changes: one word replaced, a date appended."""
    middle = len(words) // 2
    return [words[:middle] + ["changed"] + words[middle + 1 :], words + ["updated", "2024", "05", "01"]]


def test_simhash_near_identical_long_texts_are_within_3():
    words = _article(0, 3000).split()
    for edited in _edits(words):
        assert hamming(simhash(" ".join(words)), simhash(" ".join(edited))) <= 3


def test_simhash_near_identical_distance_distribution():
    # SimHash is statistical: a few changed shingles flip bits whose counts
    # were close to a tie. Measured over 200 seeds: with 1,000 words, ~90%
    # within 3 bits and none beyond 5; with 3,000 words ~97%. Pin that.
    distances = []
    for seed in range(50):
        words = _article(seed, 1000).split()
        for edited in _edits(words):
            distances.append(hamming(simhash(" ".join(words)), simhash(" ".join(edited))))
    within = sum(d <= 3 for d in distances) / len(distances)
    assert within >= 0.85, distances
    assert max(distances) <= 6, distances


@pytest.mark.parametrize("seed", range(10))
def test_simhash_different_texts_are_far(seed):
    assert hamming(simhash(_article(seed)), simhash(_article(seed + 1000))) > 10


def test_simhash_short_text_and_shingle_size():
    assert simhash("one two") == simhash("One, two.")
    assert simhash("one two three four", shingle=1) != simhash("one two three four", shingle=3)
    with pytest.raises(ValueError):
        simhash("x", shingle=0)


def _reference_simhash(text: str, shingle: int = 3) -> int:
    """The documented definition, one scalar step at a time."""
    import hashlib
    import unicodedata

    mask = 2**64 - 1
    import string

    canonical = unicodedata.normalize("NFKC", text).casefold().encode("utf-8", "surrogatepass")
    punct = bytes.maketrans(string.punctuation.encode(), b" " * len(string.punctuation))
    words = canonical.translate(punct).split()
    if not words:
        return 0
    word_hash = [int.from_bytes(hashlib.blake2b(w, digest_size=8).digest(), "little") for w in words]
    count = max(1, len(words) - shingle + 1)
    counts = [0] * 64
    for i in range(count):
        h = word_hash[i]
        for j in range(1, min(shingle, len(words))):
            h = ((h * 0x9E3779B97F4A7C15) & mask) ^ word_hash[i + j]
        h ^= h >> 30
        h = (h * 0xBF58476D1CE4E5B9) & mask
        h ^= h >> 27
        h = (h * 0x94D049BB133111EB) & mask
        h ^= h >> 31
        for bit in range(64):
            counts[bit] += (h >> bit) & 1
    return sum(1 << bit for bit in range(64) if counts[bit] * 2 > count)


@pytest.mark.parametrize(
    "text",
    ["alpha", "alpha beta", "alpha beta gamma", "a b c d e f g a b c", "Ünïcödé wörds, ﬁne!", _article(5, 300)],
)
@pytest.mark.parametrize("shingle", [1, 2, 3, 5])
def test_simhash_matches_scalar_reference(text, shingle):
    assert simhash(text, shingle=shingle) == _reference_simhash(text, shingle)


def test_simhash_word_order_matters_within_a_shingle():
    assert simhash("alpha beta gamma") != simhash("gamma beta alpha")


# Values computed by the implementation before the speed-ups of word-digest caching, per-word
# case folding, SWAR bit counting and bytes-level whitespace squeezing: stored fingerprints
# must not change.
_PINNED = [
    ("", 0x0, 0x0, "cae66941d9efbd404e4d88758ea67670"),
    ("alpha", 0x74C3ADD3DC9727C1, 0x74C3ADD3DC9727C1, "b52f7e54cd313e691148cc2c80345831"),
    (
        "The quick brown fox, jumps over the lazy dog!",
        0x567123AAC5D1C064,
        0x5C9F7A0376A53392,
        "1c9104f3dbf6d54ef83b068630538f5d",
    ),
    (
        "Straße STRASSE straße — “quoted” ﬁne Ｗｉｄｅ café cafe\u0301 İstanbul ΣΊΣΥΦΟΣ",
        0x849527FE7BB18759,
        0x9E20481412D55E1A,
        "165f0c27a6188b6ef975ab5e22d5bf25",
    ),
    (
        "tab\tnew\nline\x1cgroup\x85next\u2028para\u2029end\u3000ideo\xa0nbsp \ud800 lone",
        0xC8AD651D10203F51,
        0xA0DE0F8E212CBD3A,
        "d64b7797893b90a65c02b8c65a679280",
    ),
    (_article(42, 2000), 0x30A401CEB037C5E4, 0xFD6BBE4FCB88E496, "020a639b34899a4049260d6bf8b94337"),
]


@pytest.mark.parametrize(("text", "sh1", "sh3", "key"), _PINNED)
def test_pinned_values(text, sh1, sh3, key, implementation):
    assert simhash(text, shingle=1) == sh1
    assert simhash(text) == sh3
    assert text_fingerprint(text) == key


def _reference_fingerprint(text: str) -> str:
    """The documented definition of text_fingerprint, with str operations only."""
    import hashlib
    import unicodedata

    canonical = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return hashlib.blake2b(canonical.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


_SEPARATORS = st.sampled_from(
    [
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\x0b",
        "\x0c",
        "\x1c",
        "\x1f",
        "\x85",
        "\xa0",
        "\u1680",
        "\u2003",
        "\u2028",
        "\u2029",
        "\u202f",
        "\u3000",
        ",",
        "!",
        "...",
    ]
)
_WORDISH = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["Straße", "ẞ", "İ", "ﬁ", "Ｗ", "K", "ΣΣ", "ς", "é", "e\u0301", "\ud800", "ǅ", "ŉ", "😀"]),
)
_TEXTS = st.one_of(
    st.text(),
    st.lists(st.tuples(_WORDISH, _SEPARATORS)).map(lambda parts: "".join(a + b for a, b in parts)),
)


@settings(max_examples=300)
@given(_TEXTS, st.integers(1, 4))
def test_property_matches_scalar_references(text, shingle):
    assert simhash(text, shingle=shingle) == _reference_simhash(text, shingle)
    assert text_fingerprint(text) == _reference_fingerprint(text)


@pytest.mark.parametrize("words", [1, 2, 3, 254, 255, 256, 257, 509, 510, 511, 512])
def test_simhash_bit_counting_at_block_boundaries(words, implementation):
    # The bit columns are counted 255 shingles at a time: sizes around multiples of 255.
    text = _article(words, words)
    assert simhash(text) == _reference_simhash(text)
    same = " ".join(["same"] * words)  # every shingle identical: each count is 0 or all
    assert simhash(same) == _reference_simhash(same)


def test_simhash_same_with_cold_warm_and_evicting_word_cache(monkeypatch):
    monkeypatch.setattr(dedup, "_compiled_simhash", None)  # the numpy code's cache (_dedup.c's below)
    texts = [_article(seed, 500) + " Größe ΣΊΣΥΦΟΣ ﬁne" for seed in range(5)]
    expected = [_reference_simhash(t) for t in texts]
    dedup._WORD_DIGESTS.clear()
    assert [simhash(t) for t in texts] == expected  # cold
    assert [simhash(t) for t in texts] == expected  # warm
    dedup._WORD_DIGESTS.clear()
    monkeypatch.setattr(dedup, "_WORD_CACHE_SIZE", 50)
    assert [simhash(t) for t in texts] == expected  # emptied while in use
    assert 0 < len(dedup._WORD_DIGESTS) <= 50
    assert [simhash(t) for t in texts] == expected


# --------------------------------------------------------------------------
# the compiled loops (_dedup.c) against the numpy and bytes code they replace
# --------------------------------------------------------------------------


def test_the_compiled_loops_are_built():
    """CI builds them (.ci/run sets POLITECRAWL_REQUIRE_KERNELS, as for the searcher's kernels);
    elsewhere their absence is a slower crawl, not an error."""
    if not compiled_built:
        if os.environ.get("POLITECRAWL_REQUIRE_KERNELS") or os.environ.get("CI"):
            pytest.fail("politecrawl.content._dedup is required here: it was not built")
        pytest.skip("politecrawl.content._dedup is not built (no C compiler)")
    from politecrawl.content import _dedup

    assert dedup._compiled_simhash is _dedup.simhash and dedup._compiled_squeeze is _dedup.squeeze_spaces


def _numpy_simhash(text: str, shingle: int) -> int:
    saved = dedup._compiled_simhash
    dedup._compiled_simhash = None
    try:
        return simhash(text, shingle=shingle)
    finally:
        dedup._compiled_simhash = saved


def _bytes_squeeze(data: bytes) -> bytes:
    """text_fingerprint's squeezing without the compiled loop."""
    while b"  " in data:
        data = data.replace(b"  ", b" ")
    return data.strip(b" ")


# Words at the compiled cache's length bound (32 bytes) and past it, repeated within a text.
_LONG_WORDS = st.sampled_from(["x" * 31, "y" * 32, "z" * 33, "Ä" * 16, "Ä" * 17, "long" * 20])
_TEXTS_AND_LONG = st.one_of(
    _TEXTS,
    st.lists(st.tuples(st.one_of(_WORDISH, _LONG_WORDS), _SEPARATORS)).map(lambda p: "".join(a + b for a, b in p)),
    st.text(alphabet=" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0,.;!?-_'\"()[]{}<>/\\|@#$%^&*+=~`:aAbBzZéÉß\ud800"),
)


@needs_compiled
@settings(max_examples=500)
@given(_TEXTS_AND_LONG, st.integers(1, 5))
def test_property_compiled_matches_numpy(text, shingle):
    assert simhash(text, shingle=shingle) == _numpy_simhash(text, shingle)


@needs_compiled
@settings(max_examples=300)
@given(
    st.binary(max_size=200) | st.lists(st.sampled_from([b" ", b"  ", b"a", b"bc", b"\xc3\xa9", b"\t"])).map(b"".join)
)
def test_property_squeeze_matches_bytes_code(data):
    from politecrawl.content import _dedup

    assert _dedup.squeeze_spaces(data) == _bytes_squeeze(data)


@needs_compiled
def test_compiled_cache_is_bounded_and_calls_back_once_per_new_word(monkeypatch):
    from politecrawl.content import _dedup

    calls: list[bytes] = []

    def counting_digest(word: bytes) -> bytes:
        calls.append(word)
        return dedup._word_digest(word)

    _dedup.cache_clear()
    text = "alpha beta alpha Größe GRÖSSE " + "x" * 40 + " " + "x" * 40
    data = text.encode().translate(dedup._WORD_TABLE)
    assert _dedup.simhash(data, 3, counting_digest) == _numpy_simhash(text, 3)
    # each short word once, ASCII or not (the non-ASCII letters are folded by _word_digest, after
    # the cache: "grÖsse" is a word of its own there); the word longer than CACHE_MAX_LEN at each
    # occurrence
    assert calls == [b"alpha", b"beta", "größe".encode(), "grÖsse".encode(), b"x" * 40, b"x" * 40]
    assert _dedup.cache_len() == 4
    calls.clear()
    assert _dedup.simhash(data, 3, counting_digest) == _numpy_simhash(text, 3)
    assert calls == [b"x" * 40, b"x" * 40]  # the short words from the cache

    # Many distinct words: the cache empties when full and keeps giving the same values.
    many = " ".join(f"w{i}" for i in range(_dedup.CACHE_SIZE + 5000))
    for _ in range(2):
        assert simhash(many) == _numpy_simhash(many, 3)
        assert 0 < _dedup.cache_len() <= _dedup.CACHE_SIZE
    assert simhash(text) == _numpy_simhash(text, 3)


@needs_compiled
def test_compiled_errors_propagate():
    from politecrawl.content import _dedup

    def failing(word: bytes) -> bytes:
        raise RuntimeError("no digest")

    _dedup.cache_clear()
    with pytest.raises(RuntimeError, match="no digest"):
        _dedup.simhash(b"some words here", 3, failing)
    with pytest.raises(TypeError, match="8 bytes"):
        _dedup.simhash(b"some words here", 3, lambda word: b"short")
    with pytest.raises(TypeError, match="8 bytes"):
        _dedup.simhash(b"some words here", 3, lambda word: "12345678")
    with pytest.raises(ValueError):
        _dedup.simhash(b"x", 0, dedup._word_digest)
    with pytest.raises(TypeError):
        _dedup.squeeze_spaces("text")
    assert _dedup.cache_len() == 0  # nothing kept from the failed calls
    assert _dedup.simhash(b"", 3, failing) == 0 and _dedup.simhash(b" \t ", 1, failing) == 0


def _load_compiled_as(name: str) -> object:
    """A fresh copy of content/compiled.py (which loads _dedup.c; the tests' module is left
    alone), imported now."""
    from politecrawl.content import compiled

    spec = importlib.util.spec_from_file_location(f"politecrawl.content.{name}", compiled.__file__)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("how", ["not built", "POLITECRAWL_NO_KERNELS"])
def test_falls_back_to_numpy_without_the_compiled_loops(monkeypatch, how):
    if how == "not built":
        monkeypatch.setitem(sys.modules, "politecrawl.content._dedup", None)  # its import raises ImportError
    else:
        monkeypatch.setenv("POLITECRAWL_NO_KERNELS", "1")
    loaded = _load_compiled_as("compiled_without_c")
    assert loaded.simhash is None and loaded.squeeze_spaces is None and loaded.squash_whitespace is None
    monkeypatch.setattr(dedup, "_compiled_simhash", loaded.simhash)
    monkeypatch.setattr(dedup, "_compiled_squeeze", loaded.squeeze_spaces)
    module = dedup
    numpy_calls = []
    real = module._simhash_numpy
    monkeypatch.setattr(module, "_simhash_numpy", lambda data, shingle: numpy_calls.append(data) or real(data, shingle))
    for text, sh1, sh3, key in _PINNED:
        assert module.simhash(text, shingle=1) == sh1 and module.simhash(text) == sh3
        assert module.text_fingerprint(text) == key
    assert len(numpy_calls) == 2 * len(_PINNED)


def test_unicode_facts_behind_the_fast_paths():
    """What simhash and text_fingerprint rely on to fold and split bytes, not str."""
    import string
    import sys
    import unicodedata

    from politecrawl.content import dedup

    separators = set(string.punctuation) | set(" \t\n\r\x0b\x0c")
    for cp in range(sys.maxunicode + 1):
        char = chr(cp)
        folded = char.casefold()
        if cp < 0x80:  # ASCII: case folding is lower-casing
            assert folded == char.lower()
            continue
        assert folded  # never empty
        # Folding a non-ASCII character never yields a word separator or whitespace, and
        # whitespace folds to itself: folding word by word is folding the whole text.
        assert not any(c in separators or c.isspace() for c in folded) or folded == char, hex(cp)
        if char.isspace() and char not in dedup._NFKC_WIDE_SPACES:
            # ... and this whitespace cannot occur in NFKC text: it decomposes (compatibility
            # mapping, or a canonical singleton, never recomposed).
            decomposition = unicodedata.decomposition(char)
            assert decomposition.startswith("<") or len(decomposition.split()) == 1, hex(cp)
            assert unicodedata.normalize("NFKC", char) != char


# --------------------------------------------------------------------------
# hamming, signed 64-bit helpers
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "d"),
    [(0, 0, 0), (0, 1, 1), (0, U64 - 1, 64), (0b1010, 0b0101, 4), (U64 - 1, U64 - 2, 1)],
)
def test_hamming(a, b, d):
    assert hamming(a, b) == d


@pytest.mark.parametrize(
    ("unsigned", "signed"),
    [(0, 0), (1, 1), (2**63 - 1, 2**63 - 1), (2**63, -(2**63)), (U64 - 1, -1)],
)
def test_signed64(unsigned, signed):
    assert to_signed64(unsigned) == signed
    assert from_signed64(signed) == unsigned


@given(st.integers(0, U64 - 1))
def test_signed64_roundtrip(fp):
    v = to_signed64(fp)
    assert -(2**63) <= v < 2**63
    assert from_signed64(v) == fp


@pytest.mark.parametrize("bad", [-1, U64])
def test_to_signed64_range(bad):
    with pytest.raises(ValueError):
        to_signed64(bad)


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1])
def test_from_signed64_range(bad):
    with pytest.raises(ValueError):
        from_signed64(bad)


@settings(max_examples=500)
@given(
    st.text(max_size=80)
    | st.lists(
        st.sampled_from(["a", "B", " ", "\t", "é", "É", "ß", "ẞ", "Σ", "ς", "ﬁ", "“", "’", "東", "İ", "Ǆ", "\u00a0"])
    ).map("".join)
)
def test_property_the_folded_bytes_are_the_canonical_text(text):
    """_folded_utf8's shortcuts (ASCII folded by a table; the non-ASCII characters left alone
    when each is its own case fold, else the whole text case-folded) give the definition:
    NFKC, casefold, whitespace runs made one space."""
    folded = dedup._folded_utf8(text)
    canonical = dedup._canonical_text(text)
    if folded is None:  # non-ASCII whitespace: the caller splits the str instead
        assert any(ch.isspace() and not ch.isascii() for ch in canonical)
        return
    assert folded == canonical.encode("utf-8", "surrogatepass").translate(dedup._FOLD_SPACE_TABLE)
