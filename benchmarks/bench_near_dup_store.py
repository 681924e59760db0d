"""Near-duplicate lookups in the store at 1,000,000 fingerprints: block index vs a full scan.

    python benchmarks/bench_near_dup_store.py [--n 1000000] [--lookups 2000]

The crawler finds near-duplicates inside the store's release transaction (shared by all
processes): the four 16-bit blocks of each 64-bit SimHash are indexed columns, and a lookup
reads the four matching index ranges (pigeonhole: distance <= 3 means one block is equal).
This fills an SQLite store's pages table with N random fingerprints, plants near-duplicates,
and times that lookup against a full-scan query in the same run.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import time
from pathlib import Path

from politecrawl.content.dedup import hamming, to_signed64
from politecrawl.store import open_store
from politecrawl.store.page_writes import simhash_blocks
from politecrawl.store.sqlite import _near_duplicate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=2_000)
    args = ap.parse_args()
    rng = random.Random(7)
    path = Path(tempfile.mkdtemp()) / "near.db"
    open_store(str(path)).close()
    db = sqlite3.connect(path)
    fps = [rng.getrandbits(64) for _ in range(args.n)]
    t0 = time.perf_counter()
    db.executemany(
        "INSERT INTO pages (url_id, url, final_url, status, fetched_at, simhash, sh0, sh1, sh2, sh3)"
        " VALUES (?, '', '', 200, 0, ?, ?, ?, ?, ?)",
        ((i + 1, to_signed64(fp), *simhash_blocks(fp)) for i, fp in enumerate(fps)),
    )
    db.commit()
    build = time.perf_counter() - t0
    queries = []
    for k in range(args.lookups):
        if k % 2 == 0:  # a planted near-duplicate: flip 1-3 bits of a stored fingerprint
            fp = fps[rng.randrange(args.n)]
            for bit in rng.sample(range(64), rng.randint(1, 3)):
                fp ^= 1 << bit
            queries.append(fp)
        else:
            queries.append(rng.getrandbits(64))
    t0 = time.perf_counter()
    found = sum(_near_duplicate(db, q, simhash_blocks(q), -1) is not None for q in queries)
    indexed = time.perf_counter() - t0
    scan_n = max(5, args.lookups // 200)
    t0 = time.perf_counter()
    for q in queries[:scan_n]:
        for (fp,) in db.execute("SELECT simhash FROM pages"):
            if hamming(q, fp & 0xFFFFFFFFFFFFFFFF) <= 3:
                break
    scan = (time.perf_counter() - t0) / scan_n
    per = indexed / len(queries)
    print(f"fingerprints in the store : {args.n:,} (inserted in {build:.1f}s)")
    print(
        f"block-index lookups       : {len(queries):,} in {indexed:.2f}s = {len(queries) / indexed:,.0f}/s "
        f"({per * 1e3:.3f} ms each); near-duplicates found {found} of {args.lookups // 2 + args.lookups % 2} planted"
    )
    print(f"full scan (same store)    : {scan * 1e3:.1f} ms each ({scan_n} lookups)")
    print(f"speed-up                  : {scan / per:,.0f}x")


if __name__ == "__main__":
    main()
