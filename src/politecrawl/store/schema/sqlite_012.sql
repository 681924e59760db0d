-- politecrawl store, SQLite, schema version 12.
-- resources: the scripts and data a rendered page's browser asked for (crawl --render), kept so a
-- bundle every page loads is fetched once per crawl, whatever the number of worker processes:
-- its answer (status, the headers passed to the browser as JSON, the body as the browser gets it),
-- its validators for the next conditional request, and when it was fetched (the store's clock).
CREATE TABLE IF NOT EXISTS resources (
  url TEXT PRIMARY KEY,
  fetched_at REAL NOT NULL,
  status INTEGER NOT NULL,
  headers TEXT NOT NULL,
  body BLOB NOT NULL,
  etag TEXT,
  last_modified TEXT
);
CREATE INDEX IF NOT EXISTS resources_fetched ON resources (fetched_at)
