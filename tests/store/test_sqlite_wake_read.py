"""SQLite: "when is the next host due?" (``Store.wake_time``) reads the index of hosts with work
alone (schema 8), never the hosts' rows, which hold each host's robots.txt and learned URL
patterns. Judged from SQLite's own program for the statement: which cursor each column comes from."""

from __future__ import annotations

import sqlite3

from politecrawl.store.common import affinity_params
from politecrawl.store.sqlite import _WAKE_TIME, SQLiteStore


def _columns_read_from_the_table(path) -> int:
    """How many column reads of the wake-up statement go to the hosts table itself."""
    db = sqlite3.connect(path)
    try:
        hosts_root = db.execute(
            "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'hosts'"
        ).fetchone()[0]
        program = db.execute(
            f"EXPLAIN {_WAKE_TIME}", {"now": 0.0, "min_delay": 1.0, **affinity_params(None)}
        ).fetchall()
        # (addr, opcode, p1, p2, p3, ...): OpenRead's p1 is the cursor, p2 the b-tree's root page.
        table_cursors = {p1 for _, op, p1, p2, *_ in program if op == "OpenRead" and p2 == hosts_root}
        return sum(1 for _, op, p1, *_ in program if op == "Column" and p1 in table_cursors)
    finally:
        db.close()


def test_the_wake_up_read_takes_every_column_from_the_index(tmp_path):
    path = tmp_path / "crawl.db"
    SQLiteStore(path).close()
    assert _columns_read_from_the_table(path) == 0


def test_negative_control_the_index_before_schema_8_sends_the_read_to_every_hosts_row(tmp_path):
    path = tmp_path / "crawl.db"
    SQLiteStore(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP INDEX hosts_ready")
    db.execute("CREATE INDEX hosts_ready ON hosts (next_allowed_at) WHERE pending > 0")
    db.commit()
    db.close()
    assert _columns_read_from_the_table(path) > 0
