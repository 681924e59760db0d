-- politecrawl store, PostgreSQL, schema version 4.
-- request_url: the URL as the link gave it, where that differs from the key in url (the key sorts
-- the query for deduplication; some servers read parameters in order). NULL: request the key.
ALTER TABLE frontier ADD COLUMN IF NOT EXISTS request_url text;
-- What export offers beside the text: the page's declared language (<html lang>, else the
-- Content-Language header) and its outgoing links (normalized, newline-separated, at most 1,000).
ALTER TABLE pages ADD COLUMN IF NOT EXISTS language text;
ALTER TABLE pages ADD COLUMN IF NOT EXISTS links text;
