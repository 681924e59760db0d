-- politecrawl store, SQLite, schema version 1.
-- hosts: the politeness state. Changed only by atomic claims/releases.
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS hosts (
  host              TEXT PRIMARY KEY,          -- scheme://host[:port], RFC 9309's unit
  next_allowed_at   REAL NOT NULL DEFAULT 0,   -- epoch seconds; 0 = never seen, claimable now
  wait_reason       TEXT,                      -- min-delay | crawl-delay | adaptive | retry-after | backoff | parked | robots-unreachable
  lease_owner       TEXT,
  lease_expires_at  REAL,
  claimed_at        REAL,                      -- when the current lease was taken (next_allowed_at was due by then)
  pending           INTEGER NOT NULL DEFAULT 0, -- URLs queued or leased on this host
  robots_status     TEXT,                      -- NULL unknown | 'parsed' | 'allow-all'
  robots_body       BLOB,
  robots_fetched_at REAL,
  robots_expires_at REAL,                      -- refetch due after this (24 h)
  crawl_delay       REAL,
  response_time     REAL,                      -- smoothed seconds
  failures          INTEGER NOT NULL DEFAULT 0,
  pages_fetched     INTEGER NOT NULL DEFAULT 0,
  last_error        TEXT,
  ip                TEXT,                      -- resolved address, for the per-IP cap
  ip_resolved_at    REAL,
  recent_pages      REAL NOT NULL DEFAULT 0,   -- yield monitoring: decayed counts of pages …
  recent_duplicates REAL NOT NULL DEFAULT 0    -- … and of (near-)duplicates among them
);
CREATE INDEX IF NOT EXISTS hosts_leased_ip ON hosts (ip) WHERE lease_owner IS NOT NULL;
CREATE INDEX IF NOT EXISTS hosts_ready ON hosts (next_allowed_at) WHERE pending > 0;

CREATE TABLE IF NOT EXISTS frontier (
  id               INTEGER PRIMARY KEY,
  url              TEXT NOT NULL UNIQUE,       -- normalized
  host             TEXT NOT NULL,
  depth            INTEGER NOT NULL,
  priority         INTEGER NOT NULL DEFAULT 0, -- lower first: seeds 0, links depth
  state            TEXT NOT NULL DEFAULT 'queued', -- queued | leased | done | failed | disallowed | skipped
  attempts         INTEGER NOT NULL DEFAULT 0,
  lease_owner      TEXT,
  lease_expires_at REAL,
  discovered_at    REAL NOT NULL,
  finished_at      REAL,
  outcome          TEXT,                       -- why it ended: http-200, not-html, disallowed, error text …
  next_fetch_at    REAL,                       -- recrawl: due again after this (NULL: never)
  revisit_interval REAL,                       -- recrawl: current interval, adapted to how often it changes
  changes          INTEGER NOT NULL DEFAULT 0, -- recrawl: times the content was found changed
  kind             TEXT NOT NULL DEFAULT 'page', -- page | sitemap
  lastmod          TEXT                        -- from a sitemap, kept for freshness
);
CREATE INDEX IF NOT EXISTS frontier_due ON frontier (next_fetch_at) WHERE state = 'done' AND next_fetch_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS frontier_next ON frontier (host, priority, id) WHERE state IN ('queued', 'leased');
CREATE INDEX IF NOT EXISTS frontier_state ON frontier (state);

CREATE TABLE IF NOT EXISTS pages (
  url_id        INTEGER PRIMARY KEY REFERENCES frontier (id),
  url           TEXT NOT NULL,
  final_url     TEXT NOT NULL,
  status        INTEGER NOT NULL,
  content_type  TEXT,
  etag          TEXT,
  last_modified TEXT,
  title         TEXT,
  text          TEXT,
  bytes         INTEGER NOT NULL DEFAULT 0,
  fetched_at    REAL NOT NULL,
  fingerprint   TEXT,
  duplicate_of  INTEGER,                      -- url_id of the page this one repeats (exact or near)
  duplicate_kind TEXT,                         -- exact | near
  alias_of      TEXT,                          -- canonical URL (rel=canonical, Link header) or redirect target
  simhash       INTEGER,                       -- 64-bit SimHash as signed 64-bit
  sh0 INTEGER, sh1 INTEGER, sh2 INTEGER, sh3 INTEGER, -- its four 16-bit blocks: the near-duplicate index
  noindex       INTEGER NOT NULL DEFAULT 0,
  noarchive     INTEGER NOT NULL DEFAULT 0,    -- the text is dropped from the store once indexed
  unavailable_after REAL,                      -- epoch seconds; the indexer removes the page after it
  indexed_at    REAL,
  seq           INTEGER NOT NULL DEFAULT 0    -- bumped on every change; the indexer follows it
);
CREATE INDEX IF NOT EXISTS pages_fingerprint ON pages (fingerprint);
-- Pigeonhole: two 64-bit fingerprints within Hamming distance 3 agree on at least one of four
-- 16-bit blocks, so a near-duplicate lookup reads four small index ranges, never all pages.
CREATE INDEX IF NOT EXISTS pages_sh0 ON pages (sh0) WHERE sh0 IS NOT NULL;
CREATE INDEX IF NOT EXISTS pages_sh1 ON pages (sh1) WHERE sh1 IS NOT NULL;
CREATE INDEX IF NOT EXISTS pages_sh2 ON pages (sh2) WHERE sh2 IS NOT NULL;
CREATE INDEX IF NOT EXISTS pages_sh3 ON pages (sh3) WHERE sh3 IS NOT NULL;
CREATE INDEX IF NOT EXISTS pages_seq ON pages (seq);

CREATE TABLE IF NOT EXISTS fetch_log (
  id         INTEGER PRIMARY KEY,
  host       TEXT NOT NULL,
  url        TEXT NOT NULL,
  kind       TEXT NOT NULL,                   -- robots | page
  worker     TEXT NOT NULL,
  started_at REAL NOT NULL,
  ended_at   REAL NOT NULL,
  status     INTEGER,                         -- NULL: no answer
  bytes      INTEGER NOT NULL DEFAULT 0,
  error      TEXT,
  delay      REAL,                            -- the delay in force before this request
  retry_until REAL                            -- a Retry-After window this response opened
);
CREATE INDEX IF NOT EXISTS fetch_log_host ON fetch_log (host, started_at);

-- Every robots.txt version a host served, so an audit can replay what was in force at any moment.
CREATE TABLE IF NOT EXISTS robots_log (
  id         INTEGER PRIMARY KEY,
  host       TEXT NOT NULL,
  fetched_at REAL NOT NULL,
  status     TEXT NOT NULL,                   -- parsed | allow-all
  body       BLOB
);
CREATE INDEX IF NOT EXISTS robots_log_host ON robots_log (host, fetched_at);

-- Links not queued, by host and reason (crawl-trap defences, scope, depth): visible in status.
CREATE TABLE IF NOT EXISTS link_stats (
  host   TEXT NOT NULL,
  reason TEXT NOT NULL,
  n      INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (host, reason)
);
