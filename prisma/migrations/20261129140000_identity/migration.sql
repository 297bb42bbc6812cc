-- Identity: the token that sent a handoff (an admin sees the handoffs it sent, whichever
-- agent it sent them as), and token listings per project.
ALTER TABLE handoffs ADD COLUMN created_by_token_id uuid;
CREATE INDEX agent_tokens_project_id_idx ON agent_tokens (project_id);
