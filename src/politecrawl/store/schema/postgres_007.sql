-- politecrawl store, PostgreSQL, schema version 7.
-- For a sitemap: the host it is read for (whose robots.txt named it, directly or through an index
-- or a redirect). sitemaps.org accepts a sitemap's URLs for that host even when the file lives on
-- another host ("cross-submission"); NULL: the sitemap's own host (every row written before).
ALTER TABLE frontier ADD COLUMN IF NOT EXISTS sitemap_for text;
