-- politecrawl store, SQLite, schema version 2: anchor text for the search index.
-- The text of links between pages: one row per (target, linking host, wording), so navigation
-- repeated on every page of a site counts once. Rows are never changed; the id orders them, and
-- the indexer re-indexes the targets of rows newer than the last it saw.
CREATE TABLE IF NOT EXISTS anchors (
  id          INTEGER PRIMARY KEY,
  target      TEXT NOT NULL,                   -- normalized URL the link points at
  source_host TEXT NOT NULL,                   -- scheme://host[:port] of the linking page
  text        TEXT NOT NULL,                   -- the link's text, whitespace collapsed, <= 200 chars
  UNIQUE (target, source_host, text)
);
-- Anchors pointing at an alias (a redirect or a non-canonical URL) count for its canonical page.
CREATE INDEX IF NOT EXISTS pages_alias_of ON pages (alias_of) WHERE alias_of IS NOT NULL;
