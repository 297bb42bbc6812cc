-- Indexes that only hold the rows their readers look for (docs/PERFORMANCE.md, "Indexes that
-- only hold open work").
--
-- The full (delivery_state, seq) index served two reconciler scans (HELD, UNCERTAIN), but while
-- the table had no statistics yet (a new database, until autovacuum's first ANALYZE) the planner
-- took it for look-ups by id and by recipient as well, and kept those plans in every connection's
-- prepared statements: the end of a turn walked all handoffs in a state to find one. Now only the
-- two rare states are in it, and no hot look-up can use it.
DROP INDEX IF EXISTS handoffs_delivery_state_seq_idx;
CREATE INDEX handoffs_delivery_state_seq_idx ON handoffs (delivery_state, seq)
  WHERE delivery_state IN ('HELD', 'UNCERTAIN');

-- Open push work, for the reconciler's sweep (recipients with open work) and the turns-in-flight
-- gauge: a settled handoff leaves it. Keyed on (provider, pool), which no per-handoff look-up
-- filters on, so it never competes with the primary key or the recipient index.
CREATE INDEX handoffs_open_work_idx ON handoffs (provider, pool)
  WHERE delivery_state IN ('WAITING', 'BUSY', 'OWNER_REJECTED', 'SENDING', 'ACCEPTED', 'RUNNING');

-- Only claimed work has a lease; the lease sweep asks for nothing else.
DROP INDEX IF EXISTS handoffs_work_state_lease_expires_at_idx;
CREATE INDEX handoffs_work_state_lease_expires_at_idx ON handoffs (work_state, lease_expires_at)
  WHERE work_state = 'claimed';

-- Unique only where set: NULL keys never conflict, so indexing them only cost a write per state
-- change (most sends have no idempotency key, and a settled handoff has no in-progress key).
-- A send's ON CONFLICT DO NOTHING names no index, so it honours these as before.
DROP INDEX IF EXISTS handoffs_sender_id_idempotency_key_key;
CREATE UNIQUE INDEX handoffs_sender_id_idempotency_key_key ON handoffs (sender_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
DROP INDEX IF EXISTS handoffs_in_progress_key_key;
CREATE UNIQUE INDEX handoffs_in_progress_key_key ON handoffs (in_progress_key)
  WHERE in_progress_key IS NOT NULL;
