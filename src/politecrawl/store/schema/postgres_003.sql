-- politecrawl store, PostgreSQL, schema version 3: the store knows what each host is owed.
-- delay: the gap owed after the end of this host's latest response (min delay, Crawl-delay,
-- adaptive, backoff), as the latest release decided it. A claim moves next_allowed_at to the
-- lease expiry plus this delay, so a crash or an expired lease never brings the host back sooner.
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS delay double precision NOT NULL DEFAULT 0;
-- robots_via: a robots.txt redirect in progress: the URL whose answer decides this host's rules
-- (RFC 9309 §2.3.1.2), fetched under the claim of the host it points to; robots_hops counts them.
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS robots_via text;
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS robots_hops bigint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS hosts_robots_via ON hosts (robots_via) WHERE robots_via IS NOT NULL;
-- The audit's evidence: what the server said and how fast, as measured (not the delay the
-- crawler decided): seconds to the response headers, and the raw Retry-After header.
ALTER TABLE fetch_log ADD COLUMN IF NOT EXISTS response_seconds double precision;
ALTER TABLE fetch_log ADD COLUMN IF NOT EXISTS retry_after text;
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS claimed_at double precision;
-- in_scope: a host that a seed (or a seed host's robots.txt) redirected to is part of that
-- seed's site: its links are followed like the seed host's own.
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS in_scope bigint NOT NULL DEFAULT 0;
-- Where the response is archived (crawl --warc): the WARC file's name and the record's offset.
ALTER TABLE fetch_log ADD COLUMN IF NOT EXISTS warc_file text;
ALTER TABLE fetch_log ADD COLUMN IF NOT EXISTS warc_offset bigint;
-- What the crawl learned of the host's URL patterns (aliases, session tokens, template budgets:
-- politecrawl.patterns), as JSON, and a counter bumped at each write so workers know when
-- their copy is stale. Written under the host's lease.
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS patterns text;
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS patterns_version bigint NOT NULL DEFAULT 0;
