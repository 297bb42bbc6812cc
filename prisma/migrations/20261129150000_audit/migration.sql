-- Who changed what outside a handoff's own event log (agents, tokens, projects, settings,
-- connections, sessions, facts): one row per successful mutating request, by token id.
CREATE TABLE audit_events (
  id         bigserial PRIMARY KEY,
  token_id   uuid NOT NULL,
  project    text,
  method     text NOT NULL,
  route      text NOT NULL,
  params     jsonb NOT NULL DEFAULT '{}'::jsonb,
  status     integer NOT NULL,
  created_at timestamptz(3) NOT NULL
);
CREATE INDEX audit_events_token_id_id_idx ON audit_events (token_id, id);
