-- A2A push-notification configs (issue 33) are subscriptions of their own kind: one task (a
-- handoff), delivered by the same dispatcher, with the body and headers A2A specifies (the task
-- as a StreamResponse, X-A2A-Notification-Token or Authorization) besides Baton's signature.
CREATE TYPE subscription_kind AS ENUM ('webhook', 'a2a_push');

ALTER TABLE subscriptions
  ADD COLUMN kind                subscription_kind NOT NULL DEFAULT 'webhook',
  ADD COLUMN handoff_id          uuid REFERENCES handoffs (id) ON DELETE CASCADE,
  ADD COLUMN push_config_id      text,
  ADD COLUMN push_token          text,
  ADD COLUMN push_authentication jsonb,
  ADD COLUMN push_wire_version   text;

-- A task's configs by id (NULLs, every webhook subscription, never conflict).
CREATE UNIQUE INDEX subscriptions_handoff_id_push_config_id_key ON subscriptions (handoff_id, push_config_id);
