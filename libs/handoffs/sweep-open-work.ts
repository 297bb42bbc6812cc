import { JOB_IDS } from '../queue/redis-names.ts';
import type { CoreDeps } from './ports.ts';
import { routeOf } from '../queue/dispatch-job.ts';

export interface SweepDeps extends CoreDeps {
  readonly locks: { busy(agentIds: readonly string[]): Promise<boolean[]> };
}

/** Recipients looked at per sweep; the rest are taken in the next one. */
const SWEEP_BATCH = 5_000;

/**
 * The reconciler's sweep: Postgres is the truth, so every recipient of this deployment with
 * open push work, no turn lock held and no back-off running gets a dispatch job. This rebuilds
 * what Redis lost (a FLUSHALL, a restart, an enqueue that failed after a commit, a worker killed
 * mid-turn). Job ids are per sweep interval, so parallel sweeps from several processes add each
 * job once. Agents of another deployment are not looked at: their locks are not in this
 * deployment's Redis, so "no lock held" would be a lie about them.
 * @returns how many agents were queued.
 */
export async function sweepOpenWork(deps: SweepDeps, intervalMs: number): Promise<number> {
  const now = deps.clock.now();
  const open = await deps.handoffs.recipientsWithOpenWork(now, SWEEP_BATCH, deps.deployment);
  if (open.length === 0) return 0;
  const held = await deps.locks.busy(open.map((o) => o.recipientId));
  const sweep = Math.floor(now.getTime() / intervalMs);
  const idle = open.filter((_, i) => !held[i]);
  await Promise.all(
    idle.map((o) => deps.scheduler.enqueue({ ...routeOf(o), cause: 'sweep' }, JOB_IDS.sweep(o.recipientId, sweep))),
  );
  if (idle.length > 0) deps.logger.debug({ queued: idle.length }, 'reconciler queued agents with open work');
  return idle.length;
}
