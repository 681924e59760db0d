-- politecrawl store, PostgreSQL, schema version 8.
-- The index's marks move out of the page rows into a table of their own, as in the SQLite store
-- (sqlite_007.sql): an update writes a new version of the whole row, the page's text with it
-- where the text is kept in the row rather than out of it (TOAST), and counting the indexed pages
-- read every row. pages.indexed_at and pages.indexed_anchors are no longer written or read
-- (dropping them would rewrite every page).
CREATE TABLE IF NOT EXISTS page_marks (
  url_id      bigint PRIMARY KEY,           -- the page (pages.url_id)
  indexed_at  double precision,             -- when the index took the page's current version; NULL: not yet
  anchors     integer NOT NULL DEFAULT 0    -- anchor texts the index took with it (see reads.ANCHOR_GROWTH)
);
INSERT INTO page_marks (url_id, indexed_at, anchors)
  SELECT url_id, indexed_at, indexed_anchors FROM pages WHERE indexed_at IS NOT NULL OR indexed_anchors > 0
  ON CONFLICT (url_id) DO NOTHING;
-- The duplicates' count (status) reads this small index instead of every page row.
CREATE INDEX IF NOT EXISTS pages_duplicates ON pages (duplicate_kind) WHERE duplicate_of IS NOT NULL
