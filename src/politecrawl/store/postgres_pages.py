"""The PostgreSQL store's page writes: the SQL of a page's duplicate checks, and the pages of a
batch written several in one statement.

A statement has a fixed cost on the server (binding its plan, starting and finishing its executor
over every table and index it names) that a page statement of its own paid for each page, most of
the database's time per page. The pages of a batched release are written in rounds instead: one
statement per round, each round's pages sharing no duplicate-check key (fingerprint, SimHash
block), so that no page of a round can be the duplicate of another one of it: a page that could be
is written in a later round, whose statement sees the rows of the rounds before it. Usually a
whole batch is one round.
"""

from __future__ import annotations

from typing import Any, Sequence

import psycopg

from politecrawl.content.dedup import NEAR_DISTANCE

from .api import Claim, Outcome, PageRecord
from .common import EXACT, NEAR
from .page_writes import (
    EXACT_DUPLICATE_WHERE,
    PAGE_COLUMNS,
    PAGE_UPSERT,
    UNMARK_INDEXED,
    page_candidate,
    page_values,
)
from .postgres_frontier import page_lock_params

__all__ = ["NEAR_DUPLICATE", "PAGE_TYPES", "record_pages"]

# Near-duplicate lookup (pigeonhole, as in SQLiteStore): a fingerprint within NEAR_DISTANCE bits
# shares at least one 16-bit block, so the OR of four block equalities (a BitmapOr over the four
# partial indexes) finds every candidate; bit_count of the XOR then keeps the close ones. The
# page's blocks, SimHash and url_id are filled in by the caller ({b0} … {fp}, {url_id}).
NEAR_DUPLICATE = f"""
SELECT url_id FROM pages
WHERE (sh0 = {{b0}} OR sh1 = {{b1}} OR sh2 = {{b2}} OR sh3 = {{b3}})
  AND url_id <> {{url_id}} AND duplicate_of IS NULL AND noindex = 0 AND alias_of IS NULL
  AND bit_count((simhash # {{fp}})::bit(64)) <= {NEAR_DISTANCE}
ORDER BY url_id LIMIT 1
"""

# The SQL type of each page column (a statement that inserts from a SELECT names them).
PAGE_TYPES = {
    "url_id": "bigint",
    "url": "text",
    "final_url": "text",
    "status": "bigint",
    "content_type": "text",
    "etag": "text",
    "last_modified": "text",
    "title": "text",
    "text": "text",
    "bytes": "bigint",
    "fetched_at": "float8",
    "fingerprint": "text",
    "duplicate_of": "bigint",
    "duplicate_kind": "text",
    "alias_of": "text",
    "simhash": "bigint",
    "sh0": "integer",
    "sh1": "integer",
    "sh2": "integer",
    "sh3": "integer",
    "noindex": "integer",
    "noarchive": "integer",
    "unavailable_after": "float8",
    "language": "text",
    "links": "text",
    "seq": "bigint",
}

#: One page to write: its URL's id, the claim and outcome it came with, the page, its seq.
PageWrite = tuple[int, Claim, Outcome, PageRecord, int]

# The page columns given as arrays (the duplicate columns are decided by the statement).
_GIVEN = [c for c in PAGE_COLUMNS if c not in ("duplicate_of", "duplicate_kind")]


def _rounds(writes: Sequence[PageWrite]) -> list[list[PageWrite]]:
    """The writes in rounds whose pages share no duplicate-check key; a page goes in the round
    after the last one holding any of its keys (so after every earlier page it could duplicate)."""
    rounds: list[list[PageWrite]] = []
    last: dict[tuple[str, str], int] = {}
    for write in writes:
        lock = page_lock_params(write[3])
        keys = list(zip(lock["ns"], lock["keys"]))
        level = max((last[k] + 1 for k in keys if k in last), default=0)
        if level == len(rounds):
            rounds.append([])
        rounds[level].append(write)
        for k in keys:
            last[k] = level
    return rounds


# Python types for the element types of the binary arrays: a binary array is dumped element by
# element with the dumper of its first value's type (an int among floats would not go as float8,
# an enum member would pick its own type).
_PYTHON_TYPE = {"bigint": int, "integer": int, "float8": float, "text": str}


def _binary_array(values: list, sql_type: str) -> list:
    kind = _PYTHON_TYPE[sql_type]
    return [v if v is None else kind(v) for v in values]


def _round_statement(writes: Sequence[PageWrite]) -> tuple[str, dict[str, Any]]:
    """One statement for pages that cannot duplicate each other: their duplicate checks (each
    page against the stored pages), the pages, their index marks reset, their anchor texts.
    Returns each page's url_id and duplicate_of.

    The arrays go in binary (``%(name)b``): in text, the server parses an array element by element
    for quotes and escapes, which for the pages' texts (~20 KB each) cost it more than writing
    them (measured: 3.2 ms of server CPU for 30 such texts as a text[] in text, 1.2 in binary)."""
    rows = [page_values(url_id, page, seq, None, None) for url_id, _, _, page, seq in writes]
    params: dict[str, Any] = {}
    arrays = []
    for i, col in enumerate(PAGE_COLUMNS):
        if col in _GIVEN:
            params[f"p_{col}"] = _binary_array([r[i] for r in rows], PAGE_TYPES[col])
            arrays.append(f"%(p_{col})b::{PAGE_TYPES[col]}[]")
    params["p_candidate"] = [page_candidate(page) for _, _, _, page, _ in writes]
    params["p_near"] = [page_candidate(page) and page.simhash is not None for _, _, _, page, _ in writes]
    arrays += ["%(p_candidate)b::bool[]", "%(p_near)b::bool[]"]
    exact = "SELECT url_id FROM pages WHERE {} ORDER BY url_id LIMIT 1".format(
        EXACT_DUPLICATE_WHERE.format(fp="r.fingerprint", url_id="r.url_id")
    )
    near = NEAR_DUPLICATE.format(b0="r.sh0", b1="r.sh1", b2="r.sh2", b3="r.sh3", fp="r.simhash", url_id="r.url_id")
    select = []
    for col in PAGE_COLUMNS:
        if col == "duplicate_of":
            select.append("COALESCE(dup.exact, dup.near)")
        elif col == "duplicate_kind":
            select.append(f"CASE WHEN dup.exact IS NOT NULL THEN {EXACT} WHEN dup.near IS NOT NULL THEN {NEAR} END")
        else:
            select.append(f"r.{col}")
    ctes = [
        f"r AS (SELECT * FROM unnest({', '.join(arrays)}) AS r({', '.join(_GIVEN)}, candidate, near))",
        # Each page's checks see the pages stored before this statement: every earlier page that
        # could be its original (the rounds, and the duplicate-check keys held since the seqs).
        f"""dup AS MATERIALIZED (SELECT r.url_id AS of,
                  CASE WHEN r.candidate THEN ({exact}) END AS exact,
                  CASE WHEN r.near THEN ({near}) END AS near
                FROM r)""",
        f"""page AS (INSERT INTO pages ({", ".join(PAGE_COLUMNS)})
                     SELECT {", ".join(select)} FROM r JOIN dup ON dup.of = r.url_id ORDER BY r.url_id
                     {PAGE_UPSERT}
                     RETURNING url_id, duplicate_of)""",
        f"unmark AS ({UNMARK_INDEXED.format(url_id='ANY(%(p_url_id)b::bigint[])')})",
    ]
    anchors = [(t, claim.host, x) for _, claim, outcome, _, _ in writes for t, x in outcome.anchors]
    if anchors:
        # Under the pages lock (shared) that the seqs took: see PostgresStore._horizon for the
        # anchor ids' order.
        ctes.append("""anchor AS (INSERT INTO anchors (target, source_host, text)
                         SELECT t, h, x FROM unnest(%(a_t)b::text[], %(a_h)b::text[], %(a_x)b::text[]) AS a(t, h, x)
                         ON CONFLICT (target, source_host, text) DO NOTHING)""")
        params.update({f"a_{k}": [str(a[i]) for a in anchors] for i, k in enumerate("thx")})
    return f"WITH {', '.join(ctes)} SELECT url_id, duplicate_of FROM page", params


def record_pages(conn: psycopg.Connection, writes: Sequence[PageWrite]) -> dict[int, bool]:
    """The pages (each replacing an older version of itself; their url_ids distinct) with their
    duplicate checks and anchor texts, after the pages lock and every page's duplicate-check keys
    are held (PAGE_LOCKS). Returns, by url_id, whether each page duplicates another."""
    duplicates: dict[int, bool] = {}
    for writes_of_round in _rounds(writes):
        statement, params = _round_statement(writes_of_round)
        for url_id, duplicate_of in conn.execute(statement, params).fetchall():
            duplicates[url_id] = duplicate_of is not None
    return duplicates
