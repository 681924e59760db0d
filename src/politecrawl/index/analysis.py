"""The one tokenizer of politecrawl: documents and queries go through it.

``tokenize(text)`` is, in order:

1. Unicode NFKC normalization (full-width letters, ligatures and compatibility
   digits fold to their plain forms: ``"ｆｉle"`` -> ``"file"``);
2. ``str.casefold`` (stronger than ``lower``: ``"Straße"`` -> ``"strasse"``);
3. split on anything that is not a Unicode letter or digit (``str.isalnum``).  The underscore is a
   separator too (``"__init__"`` -> ``["init"]``, ``"sys.path"`` ->
   ``["sys", "path"]``), as in tantivy's default tokenizer;
4. digits are kept (``"python3"``, ``"3"``, ``"12"`` are tokens);
5. Chinese, Japanese and Korean (``CJK_RANGES``: Han, Hiragana, Katakana, Hangul, Bopomofo)
   are written without spaces between words, so a run of them is cut into overlapping
   character bigrams (``"東京都"`` -> ``["東京", "京都"]``; a run of one character is a token of
   one): every word of two or more characters is then found, as the phrase of its bigrams
   (``parse_query`` makes a CJK run of the query that phrase).  A run of letters and digits is
   first cut where CJK and other characters meet (``"python3で"`` -> ``["python3", "で"]``);
   the bigrams of one run take consecutive positions, so phrases, proximity and snippets work
   on them as on words;
6. tokens longer than ``MAX_TOKEN_LEN`` characters are dropped (base64 blobs and
   other junk a webmaster controls must not bloat the term dictionary);
7. stop words are **off by default**.  ``Analyzer(stop_words=True)`` removes the
   small English list ``ENGLISH_STOP_WORDS``; the setting is recorded in the
   index so queries are analysed the same way as the documents were.

The tokens are the exact words: ``"parsing"`` is not ``"parse"``.  Beside them, the index holds
the Snowball stems of the words of each page in its own language (``stemming``; the analyzer's
``stemming`` setting, on by default), which the searcher scores below the exact words.

Positions are indexes into the token list *after* stop-word removal, so a
phrase query analysed by the same analyzer lines up with the document.

Steps 3 to 7 run in C where the compiled kernels are built (``kernels.compiled.tokens``, and
``kernels.compiled.Vocabulary``: the segment writer's per-token loop); the Python code below is
the reference they are tested against, character for character, and the fallback without them.

``query.parse_query(q)`` turns user input into a ``Query``, with this tokenizer; it never raises.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import kernels

if TYPE_CHECKING:
    from ._kernels import Vocabulary as CompiledVocabulary

__all__ = [
    "ANALYZER_NAME",
    "CJK_RANGES",
    "ENGLISH_STOP_WORDS",
    "MAX_QUERY_TERMS",
    "MAX_TOKEN_LEN",
    "Analyzer",
    "Term",
    "Vocabulary",
    "is_cjk",
    "tokenize",
]

#: The analyzer's name in an index (``Analyzer.to_json``): v2 cuts CJK runs into bigrams (v1 made
#: a whole run one token). An index of another name is rebuilt from the store.
ANALYZER_NAME = "politecrawl-v2"

MAX_TOKEN_LEN = 64
MAX_QUERY_TERMS = 64

ENGLISH_STOP_WORDS = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such
    that the their then there these they this to was will with""".split()
)

# Letters and digits of any script; underscore (a \w character) is excluded.
_TOKEN_RE = re.compile(r"[^\W_]+")
#: Code points of the scripts written without spaces that the analyzer cuts into bigrams (step 5),
#: inclusive ranges; the compiled kernels hold the same table (``_kernels_src/analysis.c``), and
#: only the letters and digits among them (``str.isalnum``) are ever part of a token. Hangul Jamo;
#: the ideographic iteration marks and numerals of CJK Symbols; Hiragana, Katakana; Bopomofo,
#: Hangul Compatibility Jamo, Bopomofo Extended, Katakana Phonetic Extensions; CJK Extension A;
#: CJK Unified Ideographs; Hangul Jamo Extended-A; Hangul Syllables and Jamo Extended-B; CJK
#: Compatibility Ideographs; half-width Katakana and Hangul; Kana Supplement and Extended; CJK
#: Extensions B to H and the Compatibility Supplement.
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),
    (0x3005, 0x3007),
    (0x3021, 0x3029),
    (0x3031, 0x3035),
    (0x3038, 0x303C),
    (0x3040, 0x30FF),
    (0x3100, 0x31BF),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA960, 0xA97F),
    (0xAC00, 0xD7FF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFFDC),
    (0x1B000, 0x1B16F),
    (0x20000, 0x323AF),
)
_CJK_CLASS = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in CJK_RANGES)
#: A run of CJK code points, and one of them anywhere (is there any work for step 5 at all).
_CJK_RUN_RE = re.compile(f"[{_CJK_CLASS}]+")


def is_cjk(ch: str) -> bool:
    """Whether the character ``ch`` is in ``CJK_RANGES`` (a script the analyzer cuts into bigrams)."""
    return _CJK_RUN_RE.fullmatch(ch) is not None


def _cjk_grams(run: str) -> list[str]:
    """The tokens of a run of CJK letters: its overlapping bigrams, or the run if it is one letter."""
    if len(run) < 3:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _word_pieces(word: str) -> list[tuple[bool, str]]:
    """A run of letters and digits cut where CJK and other characters meet: (is CJK, piece)."""
    out: list[tuple[bool, str]] = []
    pos = 0
    for m in _CJK_RUN_RE.finditer(word):
        if m.start() > pos:
            out.append((False, word[pos : m.start()]))
        out.append((True, m.group()))
        pos = m.end()
    if pos < len(word):
        out.append((False, word[pos:]))
    return out


# C0/C1 controls, format characters (zero-width joiners, bidi overrides), and
# unassigned/surrogate code points; whitespace is handled separately.
_STRIP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


def _normalize(text: str) -> str:
    if text.isascii():  # fast path: NFKC is the identity and casefold == lower
        return text.lower()
    # NFKC again after casefold, so that normalizing is idempotent (the
    # Unicode "NFKC_Casefold" closure, e.g. for U+0345 COMBINING YPOGEGRAMMENI).
    # ``is_normalized`` is a quick check (~5x cheaper than ``normalize`` on the
    # python3-doc pages), and normalize(x) == x whenever it says True.
    if not _is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    text = text.casefold()
    if not _is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return text


_is_normalized = unicodedata.is_normalized

# ASCII bytes that are not letters or digits -> space; bytes >= 0x80 unchanged.
_ASCII_SEP = bytes((b if chr(b).isalnum() else 0x20) if b < 0x80 else b for b in range(256))
_ASCII_BYTES = bytes(range(0x80))


def _split_words(text: str) -> list[str]:
    """``_TOKEN_RE.findall(text)`` for normalized text, without the regex engine.

    The token class is exactly ``str.isalnum()`` (SRE's Unicode word class minus the
    underscore).  Every non-ASCII character of ``text`` that is not alnum is
    replaced by a space (the distinct ones are found on the UTF-8 bytes with the
    ASCII bytes deleted), ASCII non-alnum bytes are translated to spaces, and
    the result is split on spaces: the same runs, about 2x faster on the
    python3-doc pages.  Equality with the regex is tested on random text.
    """
    if not text.isascii():
        raw = text.encode("utf-8", "surrogatepass")
        high = raw.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")
        for ch in set(high):
            if not ch.isalnum():
                text = text.replace(ch, " ")
        data = text.encode("utf-8", "surrogatepass")
    else:
        data = text.encode("ascii")
    return data.translate(_ASCII_SEP).decode("utf-8", "surrogatepass").split()


class Vocabulary(dict[str, int]):
    """A segment's terms while it is written: term -> id, a term not seen before gets the next
    id, ``len(self)`` (the ids are the terms' order of first appearance). The compiled
    ``kernels.compiled.Vocabulary`` does the same in a hash table of UTF-8 bytes."""

    def __missing__(self, term: str) -> int:
        n = self[term] = len(self)
        return n

    def terms(self) -> list[str]:
        """The terms in id order."""
        return list(self)

    def sorted_terms(self) -> tuple[bytes, bytes]:
        """The terms sorted, one per line (UTF-8: a segment's ``terms.txt``), and each term id's
        place in that order (int32, native byte order)."""
        by_id = list(self)
        order = sorted(range(len(by_id)), key=by_id.__getitem__)
        rank = array("i", bytes(4 * len(order)))
        for place, term_id in enumerate(order):
            rank[term_id] = place
        return "\n".join([by_id[i] for i in order]).encode("utf-8"), rank.tobytes()


@dataclass(frozen=True)
class Analyzer:
    """Tokenizer settings; the default is the one documented in the module."""

    stop_words: bool = False
    #: Index the stems of each page's words in its language beside the exact words (``stemming``).
    stemming: bool = True

    def tokenize(self, text: str) -> list[str]:
        compiled = kernels.compiled
        if compiled is not None:
            tokens: list[str] = compiled.tokens(
                _normalize(text), MAX_TOKEN_LEN, ENGLISH_STOP_WORDS if self.stop_words else None
            )
            return tokens
        return self.tokenize_python(text)

    def vocabulary(self) -> Vocabulary | CompiledVocabulary:
        """A new, empty vocabulary for ``term_ids``: the compiled one where the kernels are built."""
        compiled = kernels.compiled
        return Vocabulary() if compiled is None else compiled.Vocabulary()

    def term_ids(self, text: str, vocab: Vocabulary | CompiledVocabulary) -> bytes:
        """The ids in ``vocab`` of ``tokenize(text)``, int32 in native byte order; new terms
        are added to ``vocab``. The writer's per-token loop: the compiled vocabulary makes no
        list of tokens, no Python int per token and no str for a term it already holds."""
        if isinstance(vocab, Vocabulary):
            return array("i", map(vocab.__getitem__, self.tokenize_python(text))).tobytes()
        stop = ENGLISH_STOP_WORDS if self.stop_words else None
        if text.isascii():  # normalizing ASCII is lower-casing it, which the kernel does as it reads
            return vocab.term_ids(text, MAX_TOKEN_LEN, stop, True)
        return vocab.term_ids(_normalize(text), MAX_TOKEN_LEN, stop, False)

    def tokenize_python(self, text: str) -> list[str]:
        """``tokenize`` without the compiled kernels: the reference they are tested against."""
        normalized = _normalize(text)
        tokens = _split_words(normalized)
        if not normalized.isascii() and _CJK_RUN_RE.search(normalized):
            return [t for group in self._groups(tokens) for t in group]
        if self.stop_words:
            return [t for t in tokens if len(t) <= MAX_TOKEN_LEN and t not in ENGLISH_STOP_WORDS]
        if tokens and max(map(len, tokens)) > MAX_TOKEN_LEN:
            return [t for t in tokens if len(t) <= MAX_TOKEN_LEN]
        return tokens

    def token_groups(self, text: str) -> list[list[str]]:
        """``tokenize(text)`` in groups: the bigrams of one CJK run together, each other token
        alone (what ``parse_query`` makes a phrase of). The Python code: queries are short."""
        normalized = _normalize(text)
        tokens = _split_words(normalized)
        if not normalized.isascii() and _CJK_RUN_RE.search(normalized):
            return self._groups(tokens)
        return [[t] for t in tokens if len(t) <= MAX_TOKEN_LEN and not (self.stop_words and t in ENGLISH_STOP_WORDS)]

    def _groups(self, words: list[str]) -> list[list[str]]:
        """Runs of letters and digits cut at CJK (step 5): per CJK piece its bigrams, per other
        piece itself (if short enough and no stop word)."""
        stop = ENGLISH_STOP_WORDS if self.stop_words else frozenset()
        out: list[list[str]] = []
        for word in words:
            for cjk, piece in _word_pieces(word):
                if cjk:
                    out.append(_cjk_grams(piece))
                elif len(piece) <= MAX_TOKEN_LEN and piece not in stop:
                    out.append([piece])
        return out

    def has_cjk(self, text: str) -> bool:
        """Whether ``text`` holds a CJK letter once normalized (a token ``token_groups`` may group)."""
        return not text.isascii() and _CJK_RUN_RE.search(_normalize(text)) is not None

    def normalize_token(self, raw: str) -> str | None:
        """Analyse one raw word (for snippets); None when it is not a token."""
        toks = self.tokenize(raw)
        return toks[0] if len(toks) == 1 else None

    def to_json(self) -> dict[str, object]:
        return {"name": ANALYZER_NAME, "stop_words": self.stop_words, "stemming": self.stemming}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> "Analyzer":
        # an index written before stemming says nothing of it: the pages it gets from now on are
        # stemmed (its older segments have no stemmed terms until 'politecrawl index --rebuild')
        return cls(stop_words=bool(data.get("stop_words", False)), stemming=bool(data.get("stemming", True)))


DEFAULT_ANALYZER = Analyzer()


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` with the default analyzer (no stop words; the exact words)."""
    return DEFAULT_ANALYZER.tokenize(text)


#: A term a query scores: a str, or (``stemming``: a stem group) a tuple of them, of which each
#: segment scores the first it holds (``Segment.term_id``).
Term = str | tuple[str, ...]
