-- politecrawl store, SQLite, schema version 7.
-- The index's marks move out of the page rows into a table of their own. A page row holds the
-- page's text, and SQLite writes a whole row again, text and all, for any change to it: marking
-- a page indexed wrote its text a second time, into the write-ahead log and then into the
-- database, and counting the indexed pages read every page's text. pages.indexed_at and
-- pages.indexed_anchors are no longer written or read (dropping them would rewrite every page).
CREATE TABLE IF NOT EXISTS page_marks (
  url_id      INTEGER PRIMARY KEY,          -- the page (pages.url_id)
  indexed_at  REAL,                         -- when the index took the page's current version; NULL: not yet
  anchors     INTEGER NOT NULL DEFAULT 0    -- anchor texts the index took with it (see reads.ANCHOR_GROWTH)
);
INSERT OR IGNORE INTO page_marks (url_id, indexed_at, anchors)
  SELECT url_id, indexed_at, indexed_anchors FROM pages WHERE indexed_at IS NOT NULL OR indexed_anchors > 0;
-- The duplicates' count (status) reads this small index instead of every page row.
CREATE INDEX IF NOT EXISTS pages_duplicates ON pages (duplicate_kind) WHERE duplicate_of IS NOT NULL
