-- The partial indexes of 20261201020000, each with a condition no per-handoff look-up implies.
--
-- A partial index is usable by any query whose WHERE implies its predicate, as a scan of the
-- whole index. The open-work index's predicate (an open state) was implied by every head probe
-- (recipient_id = $1 AND delivery_state = 'BUSY' ...), so where the statistics said few
-- handoffs were open (analysed after an earlier, quieter hour), the planner scanned it end to
-- end for each probe: 23 ms per turn end at 10,000 open handoffs in the bench, against 0.55.
-- Now each index also names a column the hot look-ups never test, and the reconciler's queries
-- (which test it anyway) are the only ones that can use it.
DROP INDEX IF EXISTS handoffs_open_work_idx;
CREATE INDEX handoffs_open_work_idx ON handoffs (provider, pool)
  WHERE delivery_state IN ('WAITING', 'BUSY', 'OWNER_REJECTED', 'SENDING', 'ACCEPTED', 'RUNNING')
    AND recipient_id IS NOT NULL AND provider <> 'manual';

DROP INDEX IF EXISTS handoffs_delivery_state_seq_idx;
CREATE INDEX handoffs_delivery_state_seq_idx ON handoffs (delivery_state, seq)
  WHERE delivery_state IN ('HELD', 'UNCERTAIN') AND provider IS NOT NULL;

DROP INDEX IF EXISTS handoffs_work_state_lease_expires_at_idx;
CREATE INDEX handoffs_work_state_lease_expires_at_idx ON handoffs (work_state, lease_expires_at)
  WHERE work_state = 'claimed' AND lease_expires_at IS NOT NULL;
