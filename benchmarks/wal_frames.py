"""Which tables and indexes a running crawl writes: SQLite write-ahead-log frames by b-tree.

    python benchmarks/bench_crawl.py --hosts 1000 --min-delay 2 --seconds 90 --keep &
    python benchmarks/wal_frames.py /tmp/politecrawl-bench-XXXX/bench.db --seconds 40

A commit writes every database page it changed to the WAL as one frame (a 24-byte header and the
page), so the frames a crawl writes are the bytes its store costs the disk, twice over: the
checkpoints copy them into the database. This script reads the WAL's frame headers every 20 ms
for ``--seconds`` (each frame counted once: a frame is known by the WAL header's salts and
checkpoint sequence and its index; a checkpoint that restarts the log changes the salts), then
names each frame's page by the b-tree it belongs to (SQLite's ``dbstat`` table, read at the end:
a page freed and reused meanwhile is named by its last owner). Printed: the frames and commits
seen, the median frames per commit, and the share of the frames per b-tree and page type
(``leaf``, ``internal``, ``overflow`` for the part of a row that does not fit its page).

File formats: https://www.sqlite.org/fileformat2.html#walformat (read, not written: the store is
never opened for writing).
"""

from __future__ import annotations

import argparse
import sqlite3
import struct
import time
from collections import Counter
from pathlib import Path

WAL_HEADER = struct.Struct(">IIIIIIII")  # magic, version, page size, checkpoint seq, salt-1, salt-2, checksums
FRAME_HEADER = struct.Struct(">IIIIII")  # page number, db size after commit (0: not a commit), salts, checksums


def read_frames(wal: Path, seen: set[tuple[int, int, int, int]], frames: Counter, commits: list[int]) -> None:
    """Count the frames of ``wal`` not ``seen`` before, by page number; append each commit's size."""
    try:
        fh = open(wal, "rb")
    except FileNotFoundError:
        return
    with fh:
        header = fh.read(WAL_HEADER.size)
        if len(header) < WAL_HEADER.size:
            return
        _, _, page_size, checkpoint, salt1, salt2, _, _ = WAL_HEADER.unpack(header)
        index = pending = 0
        while True:
            fh.seek(WAL_HEADER.size + index * (FRAME_HEADER.size + page_size))
            raw = fh.read(FRAME_HEADER.size)
            if len(raw) < FRAME_HEADER.size:
                return
            page, db_size, s1, s2, _, _ = FRAME_HEADER.unpack(raw)
            if (s1, s2) != (salt1, salt2):
                return  # a frame of an earlier cycle of the log: the valid ones end here
            key = (salt1, salt2, checkpoint, index)
            if key not in seen:
                seen.add(key)
                frames[page] += 1
                pending += 1
                if db_size:
                    commits.append(pending)
                    pending = 0
            index += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db", type=Path, help="the store file of a running crawl")
    ap.add_argument("--seconds", type=float, default=30.0, help="how long to follow its WAL")
    args = ap.parse_args()
    wal = args.db.with_name(args.db.name + "-wal")
    seen: set[tuple[int, int, int, int]] = set()
    frames: Counter = Counter()
    commits: list[int] = []
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        read_frames(wal, seen, frames, commits)
        time.sleep(0.02)
    db = sqlite3.connect(f"{args.db.resolve().as_uri()}?mode=ro", uri=True)
    owner = dict(db.execute("SELECT pageno, name || ' ' || pagetype FROM dbstat"))
    by_tree: Counter = Counter()
    for page, n in frames.items():
        by_tree[owner.get(page, "(no longer in the file)")] += n
    total = sum(frames.values())
    median = sorted(commits)[len(commits) // 2] if commits else 0
    print(f"{total} frames in {len(commits)} commits over {args.seconds:.0f} s; median {median} frames a commit")
    for name, n in by_tree.most_common(25):
        print(f"{n:9d} {100 * n / max(1, total):5.1f} %  {name}")


if __name__ == "__main__":
    main()
