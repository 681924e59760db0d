-- politecrawl store, PostgreSQL, schema version 12: as sqlite_012.sql.
-- resources: the scripts and data a rendered page's browser asked for (crawl --render), kept so a
-- bundle every page loads is fetched once per crawl, on every machine of a fleet.
CREATE TABLE IF NOT EXISTS resources (
  url TEXT PRIMARY KEY,
  fetched_at DOUBLE PRECISION NOT NULL,
  status INTEGER NOT NULL,
  headers TEXT NOT NULL,
  body BYTEA NOT NULL,
  etag TEXT,
  last_modified TEXT
);
CREATE INDEX IF NOT EXISTS resources_fetched ON resources (fetched_at);
