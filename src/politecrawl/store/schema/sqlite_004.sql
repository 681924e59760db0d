-- politecrawl store, SQLite, schema version 4.
-- request_url: the URL as the link gave it, where that differs from the key in url (the key sorts
-- the query for deduplication; some servers read parameters in order). NULL: request the key.
ALTER TABLE frontier ADD COLUMN request_url TEXT;
-- What export offers beside the text: the page's declared language (<html lang>, else the
-- Content-Language header) and its outgoing links (normalized, newline-separated, at most 1,000).
ALTER TABLE pages ADD COLUMN language TEXT;
ALTER TABLE pages ADD COLUMN links TEXT;
-- How late the worker's event loop ran its callbacks when a response's headers arrived: that
-- much of response_seconds was the crawler's own backlog, not the server (the adaptive delay
-- and the audit use response_seconds - loop_lag).
ALTER TABLE fetch_log ADD COLUMN loop_lag REAL
