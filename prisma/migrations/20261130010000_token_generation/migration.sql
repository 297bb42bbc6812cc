-- A token belongs to one generation of its agent. Re-registering a removed handle revives the
-- agent row under generation + 1; a token issued to an earlier generation stays refused, so a
-- removal ends its tokens for good (authentication compares the two, and removal also revokes).
ALTER TABLE agent_tokens ADD COLUMN agent_generation integer;

-- Existing agent tokens: agents.updated_at changes only when the agent is removed or revived,
-- so a token of an active agent made before it is from an older generation.
UPDATE agent_tokens t
SET agent_generation = CASE WHEN a.removed_at IS NULL AND t.created_at < a.updated_at THEN a.generation - 1 ELSE a.generation END,
    revoked_at = CASE
      WHEN t.revoked_at IS NOT NULL THEN t.revoked_at
      WHEN a.removed_at IS NOT NULL THEN a.removed_at
      WHEN t.created_at < a.updated_at THEN a.updated_at
    END
FROM agents a
WHERE a.id = t.agent_id;

-- An agent token names its generation; an admin token names neither.
ALTER TABLE agent_tokens ADD CONSTRAINT agent_tokens_agent_generation_check CHECK ((agent_id IS NULL) = (agent_generation IS NULL));
