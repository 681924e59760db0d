# Types of the compiled kernels (_kernels.c and the parts it includes from _kernels_src/, where each is described).
from collections.abc import Callable, Sequence

from typing_extensions import Buffer

__all__ = [
    "Postings",
    "Vocabulary",
    "best_window",
    "build_postings",
    "doc_freqs",
    "gather",
    "live_terms",
    "make_snippet",
    "merge_sources",
    "merge_terms",
    "pack_positions",
    "pack_postings",
    "pack_term_table",
    "posting_blocks",
    "proximity",
    "rank",
    "snippet_at",
    "snippet_hit",
    "term_column",
    "tokens",
    "top",
    "unpack_positions",
    "unpack_postings",
]

KEY_STRIDE: int

class Postings:
    def __init__(
        self,
        n_docs: int,
        terms: Buffer,
        term_end: Buffer,
        keys: Buffer,
        # (term_ptr, docs or packed, tfs or pack_ptr, pos_ptr, positions, block_ptr, blocks); a column
        # of the per-term table is an array or a packed column's (directory, bits, column, rows)
        fields: Sequence[tuple[object, Buffer, object, object, object, object, Buffer]],
    ) -> None: ...
    def lookup(self, term: str | bytes) -> int: ...
    def df(self, term_id: int, live: Buffer | None = None, field: int = -1) -> int: ...

#: A term of ``top`` and ``doc_freqs``: a str, or a tuple of them (in each segment the first it has).
Term = str | tuple[str, ...]

def doc_freqs(segments: Sequence[Postings], lives: Sequence[Buffer | None], terms: Sequence[Term]) -> bytes: ...
def top(
    segments: Sequence[Postings],
    terms: Sequence[Term],
    coef: Buffer,
    mode: int,
    norms: Sequence[tuple[Buffer, Buffer, Buffer, Buffer | None]],
    allowed: Sequence[Buffer | None],
    k: int,
    k1: float,
    k1p1: float,
    bound_params: Buffer,
    prune_min: int,
    counting: bool = True,
) -> tuple[bytes, bytes, bytes, bytes, int, int]: ...
def gather(
    segments: Sequence[Postings], term_ids: Buffer, field: int, segs: Buffer, docs: Buffer, cap: int
) -> tuple[bytes, bytes]: ...
def rank(
    segments: Sequence[Postings],
    urls: Sequence[tuple[Buffer, Buffer]],
    term_ids: Buffer,
    segs: Buffer,
    docs: Buffer,
    scores: Buffer,
    order: Sequence[int],
    start: int,
    end: int,
    proximity: tuple[int, int, float, float, float, Buffer, float, float] | None,
    snippet_cap: int,
) -> tuple[bytes, bytes, bytes, list[str], bytes | None, bytes | None, tuple[bytes, bytes, bytes, bytes] | None]: ...
def proximity(
    starts: Buffer,
    positions: Buffer,
    n_cands: int,
    n_terms: int,
    cap: int,
    reversed_weight: float,
    idfs: Buffer,
    k1: float,
    k1p1: float,
    weight: float,
) -> bytes: ...
def best_window(positions: Sequence[Buffer], width: int, limit: int) -> tuple[int, int] | None: ...
def make_snippet(
    body: str,
    low: str,
    terms: Sequence[str],
    window: int,
    lo: int,
    hi: int,
    complete: bool,
    cut_before: bool,
    lead: int,
    max_occurrences: int,
) -> tuple[str, tuple[tuple[int, int], ...]]: ...
def snippet_at(
    data: Buffer,
    done: bool,
    term: str,
    k: int,
    terms: Sequence[str],
    window: int,
    lead: int,
    max_occurrences: int,
    before_chars: int,
    from_sync: bool,
    scan_chars: int,
) -> tuple[str, tuple[tuple[int, int], ...]] | int: ...
def snippet_hit(
    compressed: Buffer,
    sync: Buffer,
    starts: Buffer,
    positions: Buffer,
    hit: int,
    terms: Sequence[str],
    distinct: Sequence[str],
    decompress: Callable[[memoryview], bytes],
    window: int,
    lead: int,
    max_occurrences: int,
    before_chars: int,
    scan_chars: int,
    width: int,
    prefer_before: int,
    scan_tokens: int,
    chars_per_token: float,
) -> tuple[str, tuple[tuple[int, int], ...]] | None: ...
def tokens(text: str, max_len: int, stop: frozenset[str] | set[str] | None = None) -> list[str]: ...

class Vocabulary:
    def term_ids(self, text: str, max_len: int, stop: frozenset[str] | set[str] | None, lower: bool) -> bytes: ...
    def terms(self) -> list[str]: ...
    def sorted_terms(self) -> tuple[bytes, bytes]: ...
    def __len__(self) -> int: ...

def merge_terms(sources: list[tuple[Buffer, Buffer, Buffer]]) -> tuple[bytes, int, list[bytes]]: ...
def build_postings(
    ids: Buffer, rank: Buffer, lens: Buffer, n_terms: int
) -> tuple[bytes, bytes, bytes, bytes, bytes]: ...
def live_terms(term_ptr: Buffer, docs: Buffer, tfs: Buffer, doc_map: Buffer) -> bytes: ...
def merge_sources(
    sources: list[tuple[Buffer, Buffer, Buffer, Buffer, Buffer, Buffer]], n_terms: int
) -> tuple[bytes, bytes, bytes, bytes, bytes]: ...
def posting_blocks(
    term_ptr: Buffer, docs: Buffer, tfs: Buffer, field_lens: Buffer, block: int
) -> tuple[bytes, bytes]: ...
def pack_postings(term_ptr: Buffer, deltas: Buffer, tfs: Buffer, block: int) -> tuple[bytes, bytes, bytes]: ...
def unpack_postings(
    packed: Buffer, pack_ptr: Buffer, term_ptr: Buffer, n_docs: int, block: int
) -> tuple[bytes, bytes]: ...
def pack_positions(values: Buffer, chunk: int) -> tuple[bytes, bytes]: ...
def pack_term_table(table: Buffer) -> tuple[bytes, bytes]: ...
def term_column(column: tuple[Buffer, Buffer, int, int], lo: int, hi: int) -> bytes: ...
def unpack_positions(packed: Buffer, chunks: Buffer, count: int, lo: int, hi: int, chunk: int) -> bytes: ...
