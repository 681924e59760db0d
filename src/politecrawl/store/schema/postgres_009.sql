-- politecrawl store, PostgreSQL, schema version 9.
-- answered_at: when the host last answered a request (any HTTP status); NULL: never, in this
-- store. A host that never answered and cannot be reached (its name does not resolve, nothing
-- listens, its certificate is not trusted) is most often the crawl's own set-up: it is tried
-- again within seconds instead of being parked for hours (policy.politeness.SetupFailure).
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS answered_at double precision;
-- setup_failure: why such a host was not reached (tls-untrusted | name-unresolved | refused |
-- unreachable); NULL once it answers. The crawl's end and status name the cause and the fix.
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS setup_failure text;
-- Hosts that answered before this version: a robots.txt read (rules or none) or a page fetched.
UPDATE hosts SET answered_at = COALESCE(robots_fetched_at, 0)
  WHERE answered_at IS NULL AND (robots_status IS NOT NULL OR pages_fetched > 0);
