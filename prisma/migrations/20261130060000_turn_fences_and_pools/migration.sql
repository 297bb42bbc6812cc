-- Fenced turn locks: every acquisition of an agent's turn lock draws a fencing number that
-- only grows (libs/locks). The attempt reservation records it on the attempt and raises the
-- agent's fence in `agent_turn_fences`; a reservation carrying an older number than the
-- agent's is refused, so a worker that lost its lock (a partition from Redis) cannot start a
-- turn. A table of its own: the hot agents row (and its indexes) is not rewritten per turn.
CREATE TABLE agent_turn_fences (
  agent_id uuid PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
  fence    bigint NOT NULL
);
ALTER TABLE delivery_attempts ADD COLUMN fence bigint;

-- Worker pools (host affinity): an agent's sessions live on one host; only workers started
-- with its pool (BATON_WORKER_POOLS) deliver to it. '' is the unnamed pool.
ALTER TABLE agents ADD COLUMN pool text NOT NULL DEFAULT '';
-- The recipient's pool, snapshotted at enrollment like its provider: the dispatch queue a
-- handoff's wake-ups go to.
ALTER TABLE handoffs ADD COLUMN pool text NOT NULL DEFAULT '';
