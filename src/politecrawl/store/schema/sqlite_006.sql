-- politecrawl store, SQLite, schema version 6.
-- For a sitemap: the host it is read for (whose robots.txt named it, directly or through an index
-- or a redirect). sitemaps.org accepts a sitemap's URLs for that host even when the file lives on
-- another host ("cross-submission"); NULL: the sitemap's own host (every row written before).
ALTER TABLE frontier ADD COLUMN sitemap_for TEXT
