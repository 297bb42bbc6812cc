import type { DispatchDeps } from './dispatch-agent.ts';
import { liftHolds } from './lift-holds.ts';
import { expireLeases } from './expire-leases.ts';
import { reconcileUncertain } from './reconcile-uncertain.ts';
import { sendReminders } from './send-reminders.ts';
import { sweepOpenWork, type SweepMemory } from './sweep-open-work.ts';

export interface ReconcileReport {
  liftedHolds: number;
  reminders: number;
  uncertain: number;
  expiredClaims: number;
  queuedAgents: number;
}

/**
 * One pass of the reconciler, in order: lift holds that ended, send due deadline reminders,
 * scan UNCERTAIN deliveries' histories, expire claims whose lease ran out, and re-queue every
 * agent with open work and no lock.
 * Every step reads Postgres and is safe to run from several processes at once.
 */
export async function reconcileOnce(
  deps: DispatchDeps & { locks: DispatchDeps['locks'] & { busy(agentIds: readonly string[]): Promise<boolean[]> } },
  intervalMs: number,
  /** The leading process's memory between sweeps (sweep-open-work.ts); absent: none kept. */
  sweepMemory?: SweepMemory,
): Promise<ReconcileReport> {
  const liftedHolds = await liftHolds(deps);
  const reminders = (await sendReminders(deps)).length;
  const uncertain = await reconcileUncertain(deps);
  const expiredClaims = await expireLeases(deps);
  const queuedAgents = await sweepOpenWork(deps, intervalMs, sweepMemory);
  return { liftedHolds, reminders, uncertain, expiredClaims, queuedAgents };
}
