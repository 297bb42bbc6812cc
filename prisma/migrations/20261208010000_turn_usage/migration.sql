-- Turn accounting (issue 34): what the runtime reported each turn used, stored with its attempt by
-- the turn end's own statement (libs/db/handoff-sql/build-transition.ts). NULL where the runtime
-- did not say; the turn's wall time is accepted_at to finished_at, already on the row.
ALTER TABLE delivery_attempts
  ADD COLUMN model text,
  ADD COLUMN input_tokens bigint,
  ADD COLUMN output_tokens bigint,
  ADD COLUMN cache_read_tokens bigint,
  ADD COLUMN cache_write_tokens bigint,
  ADD COLUMN cost_usd double precision;
