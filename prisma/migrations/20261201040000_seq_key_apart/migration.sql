-- handoffs_seq_key with a condition no head probe implies.
--
-- A head probe asks for the oldest handoff of one recipient in one state (recipient_id = $1
-- AND delivery_state = 'BUSY' ... ORDER BY seq LIMIT 1). Where the statistics say a recipient
-- has hundreds of such handoffs (a deep backlog for a few recipients), the planner expects to
-- meet one soon when it walks every handoff in seq order, and took the unique index on seq for
-- it; the walk passes every settled handoff of every recipient first (33 ms per turn end at
-- 9,000 of them, against 0.5 by the recipient's own index, seen after autovacuum's ANALYZE in
-- the middle of a run). seq stays unique (every row has one), but only a query that tests seq
-- itself (a cursor, `seq < $n`) implies this condition and can use the index.
DROP INDEX IF EXISTS handoffs_seq_key;
CREATE UNIQUE INDEX handoffs_seq_key ON handoffs (seq) WHERE seq IS NOT NULL;
