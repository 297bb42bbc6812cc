import { JOB_IDS } from '../queue/redis-names.ts';
import type { CoreDeps } from './ports.ts';
import { routeOf } from '../queue/dispatch-job.ts';
import { RECONCILER_DEFAULTS } from '../config/component-defaults.ts';

/** What a sweep touches: the open work of this deployment's agents, which of them hold a turn lock, the queues, the log. */
export type SweepDeps = Pick<CoreDeps, 'handoffs' | 'deployment' | 'scheduler' | 'clock' | 'logger'> & {
  readonly locks: { busy(agentIds: readonly string[]): Promise<boolean[]> };
};

/** Recipients looked at per sweep; the rest are taken in the next one. */
const SWEEP_BATCH = RECONCILER_DEFAULTS.sweepBatch;

/** Longest a sweep holds back re-queuing an agent because its queue has wake-ups waiting. */
export const SWEEP_HOLD_BACK_MS = RECONCILER_DEFAULTS.sweepHoldBackMs;

/**
 * What one reconciler process remembers between its sweeps: since when it has been holding
 * back each agent with open work whose queue had wake-ups waiting. Per process (a new leader
 * starts empty, which only makes it hold back a little longer), bounded by the sweep batch.
 */
export class SweepMemory {
  private readonly since = new Map<string, number>();

  /** Whether an agent seen behind a backlog now has waited long enough to be queued anyway. */
  heldBackTooLong(agentId: string, nowMs: number, maxMs = SWEEP_HOLD_BACK_MS): boolean {
    const since = this.since.get(agentId);
    if (since === undefined) {
      this.since.set(agentId, nowMs);
      return false;
    }
    return nowMs - since >= maxMs;
  }

  /** The agents were just queued: a later hold-back counts from now. */
  queued(agentIds: readonly string[]): void {
    for (const id of agentIds) this.since.delete(id);
  }

  /** Forgets every agent not in `open` (they have no open work any more). */
  keepOnly(open: ReadonlySet<string>): void {
    for (const id of this.since.keys()) if (!open.has(id)) this.since.delete(id);
  }
}

/**
 * The reconciler's sweep: Postgres is the truth, so every recipient of this deployment with
 * open push work, no turn lock held and no back-off running gets a dispatch job. This rebuilds
 * what Redis lost (a FLUSHALL, a restart, an enqueue that failed after a commit, a worker killed
 * mid-turn). Job ids are per sweep interval, so parallel sweeps from several processes add each
 * job once. Agents of another deployment are not looked at: their locks are not in this
 * deployment's Redis, so "no lock held" would be a lie about them.
 *
 * With `memory`, an agent with only waiting work (no turn that may be live) whose queue has
 * wake-ups waiting (DispatchScheduler.backlogged) is held back for up to SWEEP_HOLD_BACK_MS:
 * during a backlog its own wake-up is most likely among them, and a new job would only land
 * behind them, so a backlog does not cost a lock check and an add per agent at every sweep
 * (docs/performance-history.md, "The session before (2026-11-30 afternoon)"). A queue that
 * lost its keys answers "not backlogged", so a wipe is rebuilt at the next sweep, and a turn
 * that may be live is always looked at (a killed writer's turn goes UNCERTAIN within seconds).
 * @returns how many agents were queued.
 */
export async function sweepOpenWork(deps: SweepDeps, intervalMs: number, memory?: SweepMemory): Promise<number> {
  const now = deps.clock.now();
  const open = await deps.handoffs.recipientsWithOpenWork(now, SWEEP_BATCH, deps.deployment);
  let candidates = open;
  if (memory) {
    if (open.length < SWEEP_BATCH) memory.keepOnly(new Set(open.map((o) => o.recipientId)));
    const waiting = open.length > 0 && deps.scheduler.backlogged ? await deps.scheduler.backlogged(open.map(routeOf)) : [];
    candidates = open.filter((o, i) => o.live || !waiting[i] || memory.heldBackTooLong(o.recipientId, now.getTime()));
  }
  if (candidates.length === 0) return 0;
  const held = await deps.locks.busy(candidates.map((o) => o.recipientId));
  const sweep = Math.floor(now.getTime() / intervalMs);
  const idle = candidates.filter((_, i) => !held[i]);
  await Promise.all(idle.map((o) => deps.scheduler.enqueue({ ...routeOf(o), cause: 'sweep' }, JOB_IDS.sweep(o.recipientId, sweep))));
  memory?.queued(idle.map((o) => o.recipientId));
  if (idle.length > 0) deps.logger.debug({ queued: idle.length }, 'reconciler queued agents with open work');
  return idle.length;
}
