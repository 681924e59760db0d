-- politecrawl store, SQLite, schema version 8.
-- The index of hosts with work holds what "when is the next host due?" reads (the delay, the
-- lease, the wait reason; the host's share is its rowid, in every index entry), so that read
-- scans the index alone, a few pages, instead of every host's row. A host's row holds its
-- robots.txt and learned URL patterns (kilobytes: a row per page or more), and the read ran
-- each time a worker found nothing to claim. The columns change when next_allowed_at does (a
-- claim, a release), so the index is written no more often than before.
DROP INDEX IF EXISTS hosts_ready;
CREATE INDEX IF NOT EXISTS hosts_ready ON hosts (next_allowed_at, lease_owner, lease_expires_at, wait_reason)
  WHERE pending > 0
