-- politecrawl store, PostgreSQL, schema version 11: as sqlite_011.sql.
-- "When is the next host due?" (Store.wake_time), asked each time a worker's claim comes back
-- short, reads the first entries of two indexes instead of every host with work (an aggregate over
-- the hosts table: a third of a second at a million hosts):
-- hosts_waking: the hosts with work that nobody holds and that are not paused, in the order they
-- come due (the paused reasons are common.PAUSED_REASONS; the statement names them in the same
-- words, which is how the planner knows it may read this index);
CREATE INDEX IF NOT EXISTS hosts_waking ON hosts (next_allowed_at)
  WHERE pending > 0 AND lease_owner IS NULL AND (wait_reason IS NULL OR wait_reason NOT IN ('parked', 'low-yield', 'needs-fix'));
-- hosts_leases: the hosts in flight (claimed, with work), in the order their leases run out.
CREATE INDEX IF NOT EXISTS hosts_leases ON hosts (lease_expires_at) WHERE lease_owner IS NOT NULL AND pending > 0;
