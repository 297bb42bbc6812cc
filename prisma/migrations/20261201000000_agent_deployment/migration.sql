-- Deployments: several Baton deployments (each a BATON_REDIS_PREFIX, with its own queues and turn
-- locks) may share one database. Each agent belongs to the deployment whose process registered
-- it, and only that deployment's workers sweep, deliver, follow or observe its turns: a worker
-- of another deployment finds no turn lock of it in its own Redis and would take its live turns
-- for abandoned ones (libs/handoffs/README.md, "Deployments").
-- Agents registered before this migration belong to the default deployment, `baton` (the
-- default BATON_REDIS_PREFIX). No default afterwards: every registration names its deployment.
ALTER TABLE agents ADD COLUMN deployment text NOT NULL DEFAULT 'baton';
ALTER TABLE agents ALTER COLUMN deployment DROP DEFAULT;
