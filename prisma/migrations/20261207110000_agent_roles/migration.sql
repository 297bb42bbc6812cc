-- Agents declare roles (issue 34): the names a handoff sent to a role is routed by. Checked and
-- lower-cased by libs/domain/agent-roles.ts before they are written; '{}' declares none.
ALTER TABLE agents ADD COLUMN roles text[] NOT NULL DEFAULT '{}';
