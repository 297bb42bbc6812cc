-- What webhook agents reported about their turns by signed callback (POST /v1/webhooks/callback),
-- one row per request id. `running` may be replaced by a final status; a final row never changes
-- (a different final report for the same request id is refused as replay_conflict).
CREATE TABLE turn_reports (
  request_id  uuid PRIMARY KEY,
  attempt_id  uuid NOT NULL REFERENCES delivery_attempts (id) ON DELETE CASCADE,
  status      text NOT NULL CHECK (status IN ('running', 'returned', 'failed', 'busy', 'rejected')),
  summary     text,
  output      jsonb,
  error       text,
  received_at timestamptz(3) NOT NULL
);

CREATE INDEX turn_reports_attempt_id_idx ON turn_reports (attempt_id);
