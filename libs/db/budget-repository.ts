import type { BudgetLimits, BudgetSpent } from '../domain/budgets.ts';
import { prepared, type Queryable } from './prepared.ts';

/** A budget as stored, with the names it is shown by. */
export interface BudgetRecord {
  readonly id: string;
  readonly projectId: string;
  readonly projectSlug: string;
  /** null: the project's budget, over all its agents. */
  readonly agentId: string | null;
  readonly agentHandle: string | null;
  readonly limits: BudgetLimits;
  readonly updatedAt: Date;
}

interface BudgetRow {
  id: string;
  projectId: string;
  projectSlug: string;
  agentId: string | null;
  agentHandle: string | null;
  tokensPerDay: string | null;
  usdPerDay: number | null;
  updatedAt: Date;
}

const COLUMNS = `b.id, b.project_id AS "projectId", p.slug AS "projectSlug", b.agent_id AS "agentId", a.handle AS "agentHandle",
  b.tokens_per_day AS "tokensPerDay", b.usd_per_day AS "usdPerDay", b.updated_at AS "updatedAt"`;

const FROM = `FROM budgets b JOIN projects p ON p.id = b.project_id LEFT JOIN agents a ON a.id = b.agent_id`;

/** Sets (creates or replaces) the budget of project `$2` (agent `$3`, NULL: the project's). */
const SET_SQL = `
  INSERT INTO budgets (id, project_id, agent_id, tokens_per_day, usd_per_day, created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $6)
  ON CONFLICT (project_id, agent_id) DO UPDATE
    SET tokens_per_day = EXCLUDED.tokens_per_day, usd_per_day = EXCLUDED.usd_per_day, updated_at = EXCLUDED.updated_at`;

/** The budgets of project `$1`, the project's first, then by agent handle. */
const LIST_SQL = `SELECT ${COLUMNS} ${FROM} WHERE b.project_id = $1 ORDER BY a.handle NULLS FIRST`;

/** The budgets that cover agent `$1`: its own and its project's. */
const COVERING_SQL = `
  SELECT ${COLUMNS} ${FROM}
  JOIN agents r ON r.id = $1 AND b.project_id = r.project_id AND (b.agent_id IS NULL OR b.agent_id = r.id)
  ORDER BY a.handle NULLS FIRST`;

/** Whether any budget exists at all: while none does, no turn needs a look at one. */
const ANY_SQL = `SELECT EXISTS (SELECT 1 FROM budgets) AS "any"`;

/**
 * What the turns to project `$1`'s agents (or to agent `$2` alone, when not NULL) that ended
 * since `$3` spent, as their runtimes reported it on the attempts: tokens of every kind and
 * USD. Reads the attempts of handoffs to those agents, through the recipient index.
 */
const SPENT_SQL = `
  SELECT COALESCE(SUM(COALESCE(at.input_tokens, 0) + COALESCE(at.output_tokens, 0)
           + COALESCE(at.cache_read_tokens, 0) + COALESCE(at.cache_write_tokens, 0)), 0)::text AS tokens,
         COALESCE(SUM(at.cost_usd), 0)::float8 AS usd
  FROM handoffs h
  JOIN delivery_attempts at ON at.handoff_id = h.id AND at.finished_at >= $3
  WHERE h.project_id = $1 AND ($2::uuid IS NULL OR h.recipient_id = $2::uuid)`;

const record = (r: BudgetRow): BudgetRecord => ({
  id: r.id,
  projectId: r.projectId,
  projectSlug: r.projectSlug,
  agentId: r.agentId,
  agentHandle: r.agentHandle,
  limits: { tokensPerDay: r.tokensPerDay === null ? null : Number(r.tokensPerDay), usdPerDay: r.usdPerDay },
  updatedAt: r.updatedAt,
});

/** Budgets and what their turns spent (libs/handoffs/manage-budgets.ts, budget-gate.ts). */
export class BudgetRepository {
  constructor(private readonly pool: Queryable) {}

  async set(input: { id: string; projectId: string; agentId: string | null; limits: BudgetLimits; at: Date }): Promise<void> {
    await prepared(this.pool, SET_SQL, [
      input.id,
      input.projectId,
      input.agentId,
      input.limits.tokensPerDay === null ? null : String(input.limits.tokensPerDay),
      input.limits.usdPerDay,
      input.at,
    ]);
  }

  /** Removes the budget; false when there was none. */
  async remove(projectId: string, agentId: string | null): Promise<boolean> {
    const { rowCount } = await prepared(this.pool, 'DELETE FROM budgets WHERE project_id = $1 AND agent_id IS NOT DISTINCT FROM $2', [
      projectId,
      agentId,
    ]);
    return (rowCount ?? 0) > 0;
  }

  async list(projectId: string): Promise<BudgetRecord[]> {
    const { rows } = await prepared<BudgetRow>(this.pool, LIST_SQL, [projectId]);
    return rows.map(record);
  }

  async covering(agentId: string): Promise<BudgetRecord[]> {
    const { rows } = await prepared<BudgetRow>(this.pool, COVERING_SQL, [agentId]);
    return rows.map(record);
  }

  async any(): Promise<boolean> {
    const { rows } = await prepared<{ any: boolean }>(this.pool, ANY_SQL, []);
    return rows[0]?.any ?? false;
  }

  async spent(projectId: string, agentId: string | null, since: Date): Promise<BudgetSpent> {
    const { rows } = await prepared<{ tokens: string; usd: number }>(this.pool, SPENT_SQL, [projectId, agentId, since]);
    return { tokens: Number(rows[0]?.tokens ?? 0), usd: rows[0]?.usd ?? 0 };
  }
}
