-- politecrawl store, PostgreSQL, schema version 5.
-- A claim takes the eligible hosts in (next_allowed_at, host) order. Indexed on next_allowed_at
-- alone, the planner read and sorted every eligible host for each claim, so a claim's cost grew
-- with the crawl (benchmarks/bench_store.py --scale); in the claim's own order it stops at the
-- first hosts that are free.
DROP INDEX IF EXISTS hosts_ready;
CREATE INDEX IF NOT EXISTS hosts_ready ON hosts (next_allowed_at, host) WHERE pending > 0;
