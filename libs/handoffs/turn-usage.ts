import { BatonError } from '../domain/errors.ts';
import { sumUsage, roundCost, type UsageTotals } from '../domain/turn-usage.ts';
import type { Viewer } from '../domain/visibility.ts';
import type { AgentUsageRow, AttemptUsageRow } from '../db/usage-repository.ts';
import type { CoreDeps } from './ports.ts';
import { resolveProject } from './resolve-project.ts';

/**
 * Turn accounting's reads: what each turn's runtime reported (model, tokens, cost) and how long
 * it took (accepted to returned), per handoff and per agent over a time range. Written only by
 * the turn end's own statement (turn-end-moves.ts puts the adapter's `usage` on the attempt).
 */

/** A handoff's usage: each attempt's, and the sum. */
export interface HandoffUsage {
  readonly attempts: readonly AttemptUsageRow[];
  readonly total: UsageTotals;
}

/** What a handoff's attempts used, with the total. */
export async function handoffUsage(deps: Pick<CoreDeps, 'usage'>, handoffId: string): Promise<HandoffUsage> {
  const attempts = await deps.usage.ofHandoff(handoffId);
  return { attempts, total: sumUsage(attempts) };
}

/** What reading usage over a range touches. */
export type UsageDeps = Pick<CoreDeps, 'agents' | 'usage' | 'clock'>;

export interface UsageQuery {
  readonly project: string;
  /** One agent's turns (as recipient); absent: every agent the viewer may see. */
  readonly agent?: string | undefined;
  /** Default: the start of today (UTC). */
  readonly since?: Date | undefined;
  /** Default: now. */
  readonly until?: Date | undefined;
  readonly viewer: Viewer;
}

export interface UsageReport {
  readonly project: string;
  readonly agent: string | null;
  readonly since: Date;
  readonly until: Date;
  /** Per agent and model, the turns that ended in the range. */
  readonly rows: ReadonlyArray<Omit<AgentUsageRow, 'agentId'>>;
  readonly total: UsageTotals;
}

/** Midnight UTC of `now`'s day: where "today" starts. */
export function startOfDayUtc(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
}

/** Totals of several agents' rows. */
export function totalOf(rows: ReadonlyArray<Omit<AgentUsageRow, 'agentId'>>): UsageTotals {
  let cost: number | null = null;
  const t = { turns: 0, turnMs: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
  for (const r of rows) {
    for (const k of Object.keys(t) as Array<keyof typeof t>) t[k] += r[k];
    if (r.costUsd !== null) cost = (cost ?? 0) + r.costUsd;
  }
  return { ...t, costUsd: cost === null ? null : roundCost(cost) };
}

/**
 * Usage per agent and model over a range. Who sees what follows the handoffs' rule for turns:
 * an agent sees its own turns (naming another agent is `forbidden`); an admin sees every agent
 * of the project, or the agent it acts as (X-Baton-Agent).
 * @throws BatonError project_not_found, agent_not_found, forbidden, validation_failed (since after until)
 */
export async function readUsage(deps: UsageDeps, q: UsageQuery): Promise<UsageReport> {
  const project = await resolveProject(deps, q.project);
  const now = deps.clock.now();
  const since = q.since ?? startOfDayUtc(now);
  const until = q.until ?? now;
  if (since.getTime() > until.getTime()) throw new BatonError('validation_failed', 'since is after until');
  let agentId: string | undefined;
  let handle: string | null = null;
  if (q.agent !== undefined) {
    const agent = await deps.agents.findActive(project.id, q.agent.toLowerCase());
    if (!agent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(q.agent)} in project ${project.slug}`);
    agentId = agent.id;
    handle = agent.handle;
  }
  if (!q.viewer.allOwners && q.viewer.agentId !== null) {
    if (agentId !== undefined && agentId !== q.viewer.agentId) {
      throw new BatonError('forbidden', "an agent sees its own turns' usage only; an admin token sees every agent's");
    }
    agentId = q.viewer.agentId;
  }
  const found = await deps.usage.byAgent({
    projectId: project.id,
    ...(agentId ? { agentId } : {}),
    since,
    until: new Date(until.getTime() + 1),
  });
  const rows = found.map(({ agentId: _id, ...row }) => row);
  if (handle === null && agentId !== undefined) handle = found[0]?.agent ?? (await deps.agents.findById(agentId))?.handle ?? null;
  return { project: project.slug, agent: handle, since, until, rows, total: totalOf(rows) };
}
