-- politecrawl store, SQLite, schema version 3: the store knows what each host is owed.
-- delay: the gap owed after the end of this host's latest response (min delay, Crawl-delay,
-- adaptive, backoff), as the latest release decided it. A claim moves next_allowed_at to the
-- lease expiry plus this delay, so a crash or an expired lease never brings the host back sooner.
ALTER TABLE hosts ADD COLUMN delay REAL NOT NULL DEFAULT 0;
-- robots_via: a robots.txt redirect in progress: the URL whose answer decides this host's rules
-- (RFC 9309 §2.3.1.2), fetched under the claim of the host it points to; robots_hops counts them.
ALTER TABLE hosts ADD COLUMN robots_via TEXT;
ALTER TABLE hosts ADD COLUMN robots_hops INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS hosts_robots_via ON hosts (robots_via) WHERE robots_via IS NOT NULL;
-- The audit's evidence: what the server said and how fast, as measured (not the delay the
-- crawler decided): seconds to the response headers, and the raw Retry-After header.
ALTER TABLE fetch_log ADD COLUMN response_seconds REAL;
ALTER TABLE fetch_log ADD COLUMN retry_after TEXT
;
-- in_scope: a host that a seed (or a seed host's robots.txt) redirected to is part of that
-- seed's site: its links are followed like the seed host's own.
ALTER TABLE hosts ADD COLUMN in_scope INTEGER NOT NULL DEFAULT 0;
-- Where the response is archived (crawl --warc): the WARC file's name and the record's offset.
ALTER TABLE fetch_log ADD COLUMN warc_file TEXT;
ALTER TABLE fetch_log ADD COLUMN warc_offset INTEGER;
-- What the crawl learned of the host's URL patterns (aliases, session tokens, template budgets:
-- politecrawl.patterns), as JSON, and a counter bumped at each write so workers know when
-- their copy is stale. Written under the host's lease.
ALTER TABLE hosts ADD COLUMN patterns TEXT;
ALTER TABLE hosts ADD COLUMN patterns_version INTEGER NOT NULL DEFAULT 0
