-- Signed event subscriptions (issue 33): a URL that Baton POSTs the project's matching handoff
-- events to, in event id order, signed with the subscription's secret. `position` is the last
-- event id the subscription is done with (delivered or dead-lettered): the durable cursor over
-- handoff_events. One worker at a time delivers a subscription: the one whose lease it is.
CREATE TYPE subscription_status AS ENUM ('active', 'paused');

CREATE TABLE subscriptions (
  id               uuid PRIMARY KEY,
  project_id       uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  owner_agent_id   uuid REFERENCES agents (id) ON DELETE CASCADE,
  url              text NOT NULL,
  secret           text NOT NULL,
  filter           jsonb NOT NULL DEFAULT '{}',
  status           subscription_status NOT NULL DEFAULT 'active',
  paused_reason    text,
  position         bigint NOT NULL DEFAULT 0,
  attempts         integer NOT NULL DEFAULT 0,
  failing_since    timestamptz(3),
  next_attempt_at  timestamptz(3),
  last_error       text,
  lease_holder     text,
  lease_until      timestamptz(3),
  created_at       timestamptz(3) NOT NULL
);

CREATE INDEX subscriptions_project_id_idx ON subscriptions (project_id);
CREATE INDEX subscriptions_status_next_attempt_at_idx ON subscriptions (status, next_attempt_at);

CREATE TABLE subscription_dead_letters (
  subscription_id  uuid NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
  event_id         bigint NOT NULL,
  last_error       text NOT NULL,
  attempts         integer NOT NULL,
  created_at       timestamptz(3) NOT NULL,
  PRIMARY KEY (subscription_id, event_id)
);
