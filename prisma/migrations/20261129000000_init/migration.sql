-- Baton's first schema. Applied by libs/db/migrate.ts inside one transaction, under an
-- advisory lock, and recorded in baton_migrations. Mirrors prisma/schema.prisma exactly
-- (test/integration/schema-drift.test.ts checks it).

CREATE TYPE delivery_state AS ENUM (
  'WAITING', 'BUSY', 'HELD', 'UNAVAILABLE', 'OWNER_REJECTED', 'SENDING', 'UNCERTAIN',
  'ACCEPTED', 'RUNNING', 'RETURNED', 'FAILED', 'ACKNOWLEDGED', 'CANCELLED', 'DUPLICATE'
);
CREATE TYPE provider AS ENUM ('demo', 'command', 'webhook', 'codex', 'claude_code', 'manual');
CREATE TYPE work_state AS ENUM ('open', 'claimed', 'returned', 'closed', 'cancelled', 'expired');
CREATE TYPE attempt_status AS ENUM (
  'sending', 'busy', 'rejected', 'not_sent', 'lost', 'accepted', 'running', 'returned',
  'failed', 'interrupted', 'cancelled'
);
CREATE TYPE fact_kind AS ENUM ('decision', 'failed_attempt', 'lesson', 'open_question', 'note', 'result');
CREATE TYPE actor_kind AS ENUM ('system', 'sender', 'recipient', 'operator');
CREATE TYPE connection_rule AS ENUM ('allow', 'block');

CREATE TABLE workspaces (
  id         uuid PRIMARY KEY,
  slug       text NOT NULL,
  name       text NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX workspaces_slug_key ON workspaces (slug);

CREATE TABLE projects (
  id           uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE ON UPDATE CASCADE,
  slug         text NOT NULL,
  name         text NOT NULL,
  created_at   timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX projects_workspace_id_slug_key ON projects (workspace_id, slug);

CREATE TABLE agents (
  id                uuid PRIMARY KEY,
  project_id        uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE ON UPDATE CASCADE,
  handle            text NOT NULL,
  display_name      text NOT NULL,
  provider          provider NOT NULL,
  provider_settings jsonb NOT NULL DEFAULT '{}',
  delivery_target   text,
  generation        integer NOT NULL DEFAULT 1,
  removed_at        timestamptz(3),
  created_at        timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  updated_at        timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX agents_project_id_handle_key ON agents (project_id, handle);

CREATE TABLE sessions (
  id         uuid PRIMARY KEY,
  project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE ON UPDATE CASCADE,
  title      text NOT NULL,
  summary    text,
  created_at timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX sessions_project_id_created_at_idx ON sessions (project_id, created_at);

CREATE TABLE facts (
  id            uuid PRIMARY KEY,
  session_id    uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE ON UPDATE CASCADE,
  project_id    uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE ON UPDATE CASCADE,
  author_id     uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE ON UPDATE CASCADE,
  kind          fact_kind NOT NULL,
  text          text NOT NULL,
  supersedes_id uuid REFERENCES facts (id) ON DELETE SET NULL ON UPDATE CASCADE,
  created_at    timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX facts_session_id_created_at_idx ON facts (session_id, created_at);

CREATE TABLE handoffs (
  id                   uuid PRIMARY KEY,
  seq                  bigserial NOT NULL,
  project_id           uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE ON UPDATE CASCADE,
  sender_id            uuid NOT NULL REFERENCES agents (id) ON DELETE RESTRICT ON UPDATE CASCADE,
  recipient_id         uuid REFERENCES agents (id) ON DELETE RESTRICT ON UPDATE CASCADE,
  recipient_generation integer,
  provider             provider,
  delivery_target      text,
  session_id           uuid REFERENCES sessions (id) ON DELETE SET NULL ON UPDATE CASCADE,
  title                text,
  message              text NOT NULL,
  focus                text,
  done_when            text,
  context_summary      text,
  open_questions       text[] NOT NULL DEFAULT ARRAY[]::text[],
  next_steps           text[] NOT NULL DEFAULT ARRAY[]::text[],
  due_at               timestamptz(3),
  idempotency_key      text,
  content_hash         text NOT NULL,
  duplicate_of_id      uuid REFERENCES handoffs (id) ON DELETE SET NULL ON UPDATE CASCADE,
  delivery_state       delivery_state NOT NULL DEFAULT 'WAITING',
  delivery_detail      text,
  revision             integer NOT NULL DEFAULT 0,
  attempt_count        integer NOT NULL DEFAULT 0,
  refusals             integer NOT NULL DEFAULT 0,
  error_resends        integer NOT NULL DEFAULT 0,
  interrupt_resends    integer NOT NULL DEFAULT 0,
  not_before           timestamptz(3),
  work_state           work_state,
  work_attempt         integer NOT NULL DEFAULT 0,
  claim_token          text,
  claimed_by_id        uuid REFERENCES agents (id) ON DELETE RESTRICT ON UPDATE CASCADE,
  lease_expires_at     timestamptz(3),
  result_summary       text,
  result               jsonb,
  reminder_sent_at     timestamptz(3),
  created_at           timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  updated_at           timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  settled_at           timestamptz(3)
);
CREATE UNIQUE INDEX handoffs_seq_key ON handoffs (seq);
CREATE UNIQUE INDEX handoffs_sender_id_idempotency_key_key ON handoffs (sender_id, idempotency_key);
CREATE INDEX handoffs_recipient_id_delivery_state_seq_idx ON handoffs (recipient_id, delivery_state, seq);
CREATE INDEX handoffs_sender_id_seq_idx ON handoffs (sender_id, seq);
CREATE INDEX handoffs_project_id_seq_idx ON handoffs (project_id, seq);
CREATE INDEX handoffs_delivery_state_seq_idx ON handoffs (delivery_state, seq);
CREATE INDEX handoffs_sender_id_recipient_id_content_hash_idx ON handoffs (sender_id, recipient_id, content_hash);

CREATE TABLE delivery_attempts (
  id               uuid PRIMARY KEY,
  handoff_id       uuid NOT NULL REFERENCES handoffs (id) ON DELETE CASCADE ON UPDATE CASCADE,
  number           integer NOT NULL,
  request_id       uuid NOT NULL,
  status           attempt_status NOT NULL DEFAULT 'sending',
  worker_id        text,
  delivery_target  text,
  error            text,
  absent_scans     integer NOT NULL DEFAULT 0,
  first_absent_at  timestamptz(3),
  last_observed_at timestamptz(3),
  started_at       timestamptz(3) NOT NULL,
  accepted_at      timestamptz(3),
  finished_at      timestamptz(3)
);
CREATE UNIQUE INDEX delivery_attempts_request_id_key ON delivery_attempts (request_id);
CREATE UNIQUE INDEX delivery_attempts_handoff_id_number_key ON delivery_attempts (handoff_id, number);

CREATE TABLE handoff_events (
  id         bigserial PRIMARY KEY,
  handoff_id uuid NOT NULL REFERENCES handoffs (id) ON DELETE CASCADE ON UPDATE CASCADE,
  from_state delivery_state,
  to_state   delivery_state NOT NULL,
  event      text NOT NULL,
  actor_kind actor_kind NOT NULL,
  actor_id   text,
  token_id   uuid,
  reason     text,
  detail     jsonb,
  revision   integer NOT NULL,
  attempt_id uuid,
  created_at timestamptz(3) NOT NULL
);
CREATE INDEX handoff_events_handoff_id_id_idx ON handoff_events (handoff_id, id);

-- The event log is append-only: refuse UPDATE, and DELETE except through the cascade of a
-- deleted handoff (demo clean-up deletes a whole project).
CREATE FUNCTION handoff_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    RAISE EXCEPTION 'handoff_events is append-only' USING ERRCODE = 'restrict_violation';
  END IF;
  IF EXISTS (SELECT 1 FROM handoffs WHERE id = OLD.handoff_id) THEN
    RAISE EXCEPTION 'handoff_events is append-only' USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER handoff_events_no_update BEFORE UPDATE ON handoff_events
  FOR EACH ROW EXECUTE FUNCTION handoff_events_append_only();
CREATE TRIGGER handoff_events_no_delete AFTER DELETE ON handoff_events
  FOR EACH ROW EXECUTE FUNCTION handoff_events_append_only();

CREATE TABLE notifications (
  id         uuid PRIMARY KEY,
  handoff_id uuid NOT NULL REFERENCES handoffs (id) ON DELETE CASCADE ON UPDATE CASCADE,
  agent_id   uuid NOT NULL,
  kind       text NOT NULL,
  text       text NOT NULL,
  created_at timestamptz(3) NOT NULL,
  read_at    timestamptz(3)
);
CREATE UNIQUE INDEX notifications_handoff_id_kind_agent_id_key ON notifications (handoff_id, kind, agent_id);
CREATE INDEX notifications_agent_id_created_at_idx ON notifications (agent_id, created_at);

CREATE TABLE connections (
  id         uuid PRIMARY KEY,
  project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE ON UPDATE CASCADE,
  from_id    uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE ON UPDATE CASCADE,
  to_id      uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE ON UPDATE CASCADE,
  rule       connection_rule NOT NULL,
  updated_at timestamptz(3) NOT NULL
);
CREATE UNIQUE INDEX connections_from_id_to_id_key ON connections (from_id, to_id);

CREATE TABLE agent_tokens (
  id           uuid PRIMARY KEY,
  project_id   uuid REFERENCES projects (id) ON DELETE CASCADE ON UPDATE CASCADE,
  agent_id     uuid REFERENCES agents (id) ON DELETE CASCADE ON UPDATE CASCADE,
  name         text NOT NULL,
  secret_hash  text NOT NULL,
  is_admin     boolean NOT NULL DEFAULT false,
  created_at   timestamptz(3) NOT NULL,
  last_used_at timestamptz(3),
  revoked_at   timestamptz(3)
);
CREATE UNIQUE INDEX agent_tokens_secret_hash_key ON agent_tokens (secret_hash);

CREATE TABLE settings (
  key        text PRIMARY KEY,
  value      jsonb NOT NULL,
  updated_at timestamptz(3) NOT NULL
);

-- The default scope every fresh install has.
INSERT INTO workspaces (id, slug, name)
  VALUES ('00000000-0000-7000-8000-000000000001', 'default', 'Default workspace');
INSERT INTO projects (id, workspace_id, slug, name)
  VALUES ('00000000-0000-7000-8000-000000000002', '00000000-0000-7000-8000-000000000001', 'default', 'Default project');
