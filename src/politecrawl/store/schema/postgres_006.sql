-- politecrawl store, PostgreSQL, schema version 6.
-- How many anchor texts the index took with the page when it last indexed it (at most the 64 it
-- keeps). The indexer re-indexes a page for new anchor text only when that number would at least
-- double: re-indexing a page each time one more link to it turned up cost a long crawl's indexer
-- three times the work of indexing the new pages, and it fell minutes behind the crawl.
ALTER TABLE pages ADD COLUMN IF NOT EXISTS indexed_anchors integer NOT NULL DEFAULT 0;
