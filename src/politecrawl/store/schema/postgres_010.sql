-- politecrawl store, PostgreSQL, schema version 10.
-- The status figures of the fetch log, kept as the log is written: each reading of them cost a
-- scan of the whole log (0.4 s at 2 M requests: benchmarks/bench_status.py), however often
-- /api/status, the progress line or `politecrawl status` asked. Per status code (0: no answer):
-- requests, bytes, the first start and the last end.
--
-- slot: the database connection that wrote them (its backend's pid). A connection runs one
-- transaction at a time, so no two transactions writing at once update the same row: a row per
-- code for the whole store would make every release of the fleet wait for the one before it to
-- commit (and could deadlock with the host rows). The status sums over the slots; the slots of
-- connections that are gone are folded into slot 0 now and then (``PostgresConnection``), so
-- the rows stay about (connections alive) x (codes seen). Slot 0: what this step found.
CREATE TABLE IF NOT EXISTS fetch_counts (
  slot          integer NOT NULL,
  code          integer NOT NULL,
  requests      bigint NOT NULL,
  bytes         bigint NOT NULL,
  first_started double precision NOT NULL,
  last_ended    double precision NOT NULL,
  PRIMARY KEY (slot, code)
);
INSERT INTO fetch_counts (slot, code, requests, bytes, first_started, last_ended)
  SELECT 0, COALESCE(status, 0), COUNT(*), COALESCE(SUM(bytes), 0), MIN(started_at), MAX(ended_at)
  FROM fetch_log GROUP BY COALESCE(status, 0)
  ON CONFLICT DO NOTHING;
-- Once per statement (a batched release logs many requests in one), with the statement's rows.
CREATE OR REPLACE FUNCTION fetch_log_counted() RETURNS trigger LANGUAGE plpgsql
  SET search_path FROM CURRENT AS $$
BEGIN
  INSERT INTO fetch_counts AS c (slot, code, requests, bytes, first_started, last_ended)
    SELECT pg_backend_pid(), COALESCE(status, 0), COUNT(*), COALESCE(SUM(bytes), 0), MIN(started_at), MAX(ended_at)
    FROM counted_rows GROUP BY 2 ORDER BY 2
  ON CONFLICT (slot, code) DO UPDATE SET
    requests = c.requests + excluded.requests,
    bytes = c.bytes + excluded.bytes,
    first_started = LEAST(c.first_started, excluded.first_started),
    last_ended = GREATEST(c.last_ended, excluded.last_ended);
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS fetch_log_counted ON fetch_log;
CREATE TRIGGER fetch_log_counted AFTER INSERT ON fetch_log REFERENCING NEW TABLE AS counted_rows
  FOR EACH STATEMENT EXECUTE FUNCTION fetch_log_counted();
-- The last minute's rate and the requests chart read the newest requests only; the latest
-- errors, the newest of the few requests that failed.
CREATE INDEX IF NOT EXISTS fetch_log_ended ON fetch_log (ended_at);
CREATE INDEX IF NOT EXISTS fetch_log_errors ON fetch_log (ended_at) WHERE error IS NOT NULL OR status >= 400;
