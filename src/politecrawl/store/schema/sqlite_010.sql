-- politecrawl store, SQLite, schema version 10.
-- The status figures of the fetch log, kept as the log is written: each reading of them cost a
-- scan of the whole log (1.1 s at 2 M requests: benchmarks/bench_status.py), however often
-- /api/status, the progress line or `politecrawl status` asked. Per status code (0: no answer):
-- requests, bytes, the first start and the last end. Filled from the log once, here.
CREATE TABLE IF NOT EXISTS fetch_counts (
  code          INTEGER PRIMARY KEY,
  requests      INTEGER NOT NULL,
  bytes         INTEGER NOT NULL,
  first_started REAL NOT NULL,
  last_ended    REAL NOT NULL
);
INSERT OR IGNORE INTO fetch_counts (code, requests, bytes, first_started, last_ended)
  SELECT COALESCE(status, 0), COUNT(*), COALESCE(SUM(bytes), 0), MIN(started_at), MAX(ended_at)
  FROM fetch_log GROUP BY COALESCE(status, 0);
-- One statement on one line: the steps are split at each semicolon that ends a line.
CREATE TRIGGER IF NOT EXISTS fetch_log_counted AFTER INSERT ON fetch_log BEGIN INSERT INTO fetch_counts (code, requests, bytes, first_started, last_ended) VALUES (COALESCE(NEW.status, 0), 1, NEW.bytes, NEW.started_at, NEW.ended_at) ON CONFLICT (code) DO UPDATE SET requests = requests + 1, bytes = bytes + excluded.bytes, first_started = MIN(first_started, excluded.first_started), last_ended = MAX(last_ended, excluded.last_ended); END;
-- The last minute's rate and the requests chart read the newest requests only; the latest
-- errors, the newest of the few requests that failed.
CREATE INDEX IF NOT EXISTS fetch_log_ended ON fetch_log (ended_at);
CREATE INDEX IF NOT EXISTS fetch_log_errors ON fetch_log (ended_at) WHERE error IS NOT NULL OR status >= 400
