-- Routing by role (issue 34): a handoff sent to `@role:<name>` keeps the role it was sent to and
-- no recipient until a worker binds it to one capable agent at dispatch time
-- (libs/handoffs/route-by-role.ts). `routed_at` is when the current binding was made (NULL while
-- unbound): the reconciler routes a binding again once it is older than
-- BATON_ROLE_REROUTE_AFTER_MS and no turn was written.
ALTER TABLE handoffs ADD COLUMN recipient_role text;
ALTER TABLE handoffs ADD COLUMN routed_at timestamptz(3);

-- Open role handoffs only: the binding's pick (unbound ones of a role, oldest first per
-- sender), the fairness count (a sender's bound ones still open) and the reroute scan.
CREATE INDEX handoffs_open_role_idx ON handoffs (project_id, recipient_role, sender_id, seq)
  WHERE recipient_role IS NOT NULL AND settled_at IS NULL;
