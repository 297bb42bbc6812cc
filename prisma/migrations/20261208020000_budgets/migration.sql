-- Budgets (issue 34): what a project, or one agent of it, may spend a day on the turns Baton
-- delivers (libs/domain/budgets.ts). agent_id NULL: the project's budget, over all its agents.
-- One budget per project and per agent (NULLS NOT DISTINCT: one project budget).
CREATE TABLE budgets (
  id uuid PRIMARY KEY,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  agent_id uuid REFERENCES agents(id) ON DELETE CASCADE,
  tokens_per_day bigint,
  usd_per_day double precision,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now(),
  CONSTRAINT budgets_limit_check CHECK (tokens_per_day IS NOT NULL OR usd_per_day IS NOT NULL)
);
CREATE UNIQUE INDEX budgets_project_id_agent_id_key ON budgets (project_id, agent_id) NULLS NOT DISTINCT;
CREATE INDEX budgets_agent_id_idx ON budgets (agent_id);
