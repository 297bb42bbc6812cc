-- Work contracts and claims: a separate compare-and-set counter for the work (so a delivery
-- moving under a receiver's feet does not make its return stale), how the sender closed it,
-- the evidence a return cited, and the work's moves in the event log. work_requests makes a
-- replayed accept/return idempotent (same claim, same body) and a changed one a conflict.
ALTER TABLE handoffs ADD COLUMN work_revision integer NOT NULL DEFAULT 0;
ALTER TABLE handoffs ADD COLUMN work_resolution text;
ALTER TABLE handoffs ADD COLUMN close_note text;
ALTER TABLE handoffs ADD COLUMN return_outcome text;
ALTER TABLE handoffs ADD COLUMN result_fact_ids uuid[] NOT NULL DEFAULT ARRAY[]::uuid[];
ALTER TABLE handoffs ADD COLUMN returned_at timestamptz(3);
CREATE INDEX handoffs_work_state_lease_expires_at_idx ON handoffs (work_state, lease_expires_at);

ALTER TABLE handoff_events ADD COLUMN work_from_state work_state;
ALTER TABLE handoff_events ADD COLUMN work_to_state work_state;

CREATE TABLE work_requests (
  handoff_id  uuid NOT NULL REFERENCES handoffs (id) ON DELETE CASCADE ON UPDATE CASCADE,
  action      text NOT NULL,
  claim_token text NOT NULL,
  body_hash   text NOT NULL,
  response    jsonb NOT NULL,
  created_at  timestamptz(3) NOT NULL,
  PRIMARY KEY (handoff_id, action, claim_token)
);
