import { budgetHoldReason, budgetWindow, checkBudgetLimits, type BudgetLimits, type BudgetSpent } from '../domain/budgets.ts';
import { BatonError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import type { BudgetRecord } from '../db/budget-repository.ts';
import { liftHolds, type LiftHoldsDeps } from './lift-holds.ts';
import { getSettings } from './manage-settings.ts';
import type { CoreDeps } from './ports.ts';
import { findAgents, resolveProject } from './resolve-project.ts';

/** A budget as read: its limits and what its turns spent in today's window (UTC). */
export interface BudgetView {
  /** null: the project's budget, over all its agents. */
  readonly agent: string | null;
  readonly limits: BudgetLimits;
  readonly spentToday: BudgetSpent;
  /** Why new turns it covers are HELD now, or null while it is not spent. */
  readonly holding: string | null;
  /** When today's window ends and the spending counts from zero again. */
  readonly resetsAt: Date;
  readonly updatedAt: Date;
}

export type BudgetReadDeps = Pick<CoreDeps, 'agents' | 'budgets' | 'clock'>;
/** A budget change: the write, then the lift of the holds it ended (as a setting change does). */
export type BudgetChangeDeps = BudgetReadDeps & Pick<CoreDeps, 'settings'> & Omit<LiftHoldsDeps, 'settingsReader'>;

/** The agent a budget names (active, in the project), or null for the project's budget. */
async function agentIdOf(deps: Pick<CoreDeps, 'agents'>, project: Awaited<ReturnType<typeof resolveProject>>, agent: string | undefined) {
  if (agent === undefined) return null;
  const [found] = await findAgents(deps, project, [agent]);
  if (!found) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(agent.toLowerCase())} in project ${project.slug}`);
  return found.id;
}

async function view(deps: BudgetReadDeps, b: BudgetRecord): Promise<BudgetView> {
  const now = deps.clock.now();
  const window = budgetWindow(now);
  const spentToday = await deps.budgets.spent(b.projectId, b.agentId, window.start);
  const scope =
    b.agentHandle === null ? { kind: 'project' as const, project: b.projectSlug } : { kind: 'agent' as const, agent: b.agentHandle };
  return {
    agent: b.agentHandle,
    limits: b.limits,
    spentToday,
    holding: budgetHoldReason(scope, b.limits, spentToday, now),
    resetsAt: window.end,
    updatedAt: b.updatedAt,
  };
}

/** The project's budgets (its own first, then per agent), each with what it spent today. */
export async function listBudgets(deps: BudgetReadDeps, input: { project: string; agent?: string }): Promise<BudgetView[]> {
  const project = await resolveProject(deps, input.project);
  const agentId = await agentIdOf(deps, project, input.agent);
  const all = await deps.budgets.list(project.id);
  const shown = agentId === null ? all : all.filter((b) => b.agentId === null || b.agentId === agentId);
  return Promise.all(shown.map((b) => view(deps, b)));
}

/**
 * Sets the budget of a project (no `agent`) or of one agent: limits per UTC day in tokens
 * and/or USD, replacing the ones it had. Holds it ended (a budget raised above what was spent)
 * are lifted at once, the first page of them as `setSetting` does; workers see a lower budget
 * within a second (DELIVERY_WORKER_DEFAULTS.budgetMaxAgeMs, their cache).
 * @throws BatonError project_not_found, agent_not_found, invalid_budget
 */
export async function setBudget(
  deps: BudgetChangeDeps,
  input: { project: string; agent?: string; tokensPerDay?: unknown; usdPerDay?: unknown },
): Promise<BudgetView[]> {
  const limits = checkBudgetLimits(input);
  const project = await resolveProject(deps, input.project);
  const agentId = await agentIdOf(deps, project, input.agent);
  const now = deps.clock.now();
  await deps.budgets.set({ id: newId(now.getTime()), projectId: project.id, agentId, limits, at: now });
  deps.logger.info({ project: project.slug, agent: input.agent ?? null, ...limits }, 'budget set');
  await liftAfterChange(deps);
  return listBudgets(deps, { project: project.slug });
}

/**
 * Removes the budget of a project (no `agent`) or of one agent; the holds it made are lifted.
 * @throws BatonError project_not_found, agent_not_found, budget_not_found
 */
export async function clearBudget(deps: BudgetChangeDeps, input: { project: string; agent?: string }): Promise<BudgetView[]> {
  const project = await resolveProject(deps, input.project);
  const agentId = await agentIdOf(deps, project, input.agent);
  if (!(await deps.budgets.remove(project.id, agentId))) {
    const whose = input.agent === undefined ? `project ${project.slug}` : `agent ${input.agent.toLowerCase()}`;
    throw new BatonError('budget_not_found', `${whose} has no budget`);
  }
  deps.logger.info({ project: project.slug, agent: input.agent ?? null }, 'budget cleared');
  await liftAfterChange(deps);
  return listBudgets(deps, { project: project.slug });
}

async function liftAfterChange(deps: BudgetChangeDeps): Promise<void> {
  await liftHolds({ ...deps, settingsReader: { get: () => getSettings(deps) } }, { maxPages: 1 });
}
