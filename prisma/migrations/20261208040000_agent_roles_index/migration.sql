-- A send to a role finds the role's members by `roles @> ARRAY[role]` (libs/db/handoff-sql/enroll.ts):
-- a GIN index keeps that a probe, not a scan of the project's agents, however many there are.
CREATE INDEX agents_roles_idx ON agents USING gin (roles);
