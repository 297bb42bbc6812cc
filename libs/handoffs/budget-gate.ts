import { budgetHoldReason, budgetWindow } from '../domain/budgets.ts';
import type { Clock } from '../domain/clock.ts';
import type { BudgetRecord, BudgetRepository } from '../db/budget-repository.ts';
import { DELIVERY_WORKER_DEFAULTS } from '../config/component-defaults.ts';

/** What the gate reads: whether any budget exists, those covering an agent, what they spent. */
export type BudgetReads = Pick<BudgetRepository, 'any' | 'covering' | 'spent'>;

/** Agents whose answer one gate keeps at most; past it the cache starts again. */
const MAX_CACHED_AGENTS = 10_000;

interface Cached<T> {
  readonly at: number;
  readonly value: T;
}

/**
 * Whether a new turn to an agent must wait for a budget (libs/domain/budgets.ts): the reason of
 * the first budget covering it (the project's, then its own) that is spent in today's window,
 * or null. A worker keeps one gate. Which budgets cover an agent is kept `maxAgeMs` (a cache, not
 * a business timer: `performance.now()`), so a budget set or cleared applies within that; while
 * no budget exists anywhere the check costs one `EXISTS` a `maxAgeMs` per process and none per
 * turn. A covered agent's budgets and what they spent are read afresh on every ask, so the turn that
 * reached a budget holds the next one whichever worker writes it. Only the start of a turn
 * asks: a running turn is never cut, and the turns running when a budget is reached may take
 * the day past it.
 */
export class BudgetGate {
  private anyBudget: Cached<boolean> | null = null;
  private readonly covering = new Map<string, Cached<readonly BudgetRecord[]>>();

  constructor(
    private readonly deps: { readonly budgets: BudgetReads; readonly clock: Clock },
    private readonly maxAgeMs: number = DELIVERY_WORKER_DEFAULTS.budgetMaxAgeMs,
  ) {}

  /**
   * Whether any budget covers `agentId`. A covered agent's turns are not reserved on the
   * statement that reads its queue's head (attempt-reservations.ts `withHead`): they go through
   * `deliver`, which asks `holdFor` after the turn before committed what it used.
   */
  async covers(agentId: string): Promise<boolean> {
    return (await this.budgetsOf(agentId)).length > 0;
  }

  /** Why a turn to `agentId` is held for a budget now, or null. */
  async holdFor(agentId: string): Promise<string | null> {
    if (!(await this.covers(agentId))) return null;
    // Covered a moment ago: read its budgets afresh too, so one just raised or cleared (whose
    // holds the change lifted) is never applied from the cache.
    const budgets = await this.deps.budgets.covering(agentId);
    this.covering.set(agentId, { at: performance.now(), value: budgets });
    const now = this.deps.clock.now();
    const since = budgetWindow(now).start;
    for (const b of budgets) {
      const spent = await this.deps.budgets.spent(b.projectId, b.agentId, since);
      const scope =
        b.agentHandle === null ? { kind: 'project' as const, project: b.projectSlug } : { kind: 'agent' as const, agent: b.agentHandle };
      const reason = budgetHoldReason(scope, b.limits, spent, now);
      if (reason) return reason;
    }
    return null;
  }

  /** Forget what was read: this process changed a budget. */
  invalidate(): void {
    this.anyBudget = null;
    this.covering.clear();
  }

  private fresh(c: Cached<unknown>): boolean {
    return performance.now() - c.at < this.maxAgeMs;
  }

  private async budgetsOf(agentId: string): Promise<readonly BudgetRecord[]> {
    if (!(await this.anyExists())) return [];
    const cached = this.covering.get(agentId);
    if (cached && this.fresh(cached)) return cached.value;
    const value = await this.deps.budgets.covering(agentId);
    if (this.covering.size >= MAX_CACHED_AGENTS) this.covering.clear();
    this.covering.set(agentId, { at: performance.now(), value });
    return value;
  }

  private async anyExists(): Promise<boolean> {
    if (this.anyBudget && this.fresh(this.anyBudget)) return this.anyBudget.value;
    const value = await this.deps.budgets.any();
    this.anyBudget = { at: performance.now(), value };
    return value;
  }
}
