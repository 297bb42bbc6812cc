import { liftHolds, type LiftHoldsDeps } from './lift-holds.ts';
import { expireLeases, type ExpireLeasesDeps } from './expire-leases.ts';
import { reconcileUncertain } from './reconcile-uncertain.ts';
import { sendReminders, type SendRemindersDeps } from './send-reminders.ts';
import { sweepOpenWork, type SweepDeps, type SweepMemory } from './sweep-open-work.ts';
import type { ObserverDeps } from './uncertain-observer.ts';
import { routeRoles, type RouteRolesDeps } from './route-by-role.ts';

export interface ReconcileReport {
  liftedHolds: number;
  reminders: number;
  uncertain: number;
  expiredClaims: number;
  queuedAgents: number;
  /** Role handoffs bound to a pull agent or routed again (route-by-role.ts). */
  routed: number;
}

/** What the Postgres-only steps touch: each step's own deps (a worker's `DispatchDeps` with the locks' `busy` has them all). */
export type ReconcileStepsDeps = LiftHoldsDeps & SendRemindersDeps & ExpireLeasesDeps & SweepDeps & RouteRolesDeps;

/** A whole pass: the steps, and the observation of UNCERTAIN handoffs. */
export type ReconcileDeps = ReconcileStepsDeps & ObserverDeps;

/** The reconciler's steps that only need Postgres and Redis (no adapter), by name. */
export type ReconcileStep = 'holds' | 'reminders' | 'leases' | 'sweep' | 'routes';

/**
 * The reconciler's Postgres-only steps, each to be run on its own cadence (workers/timers): lift
 * holds that ended, send due deadline reminders, expire claims whose lease ran out, re-queue
 * every agent with open work and no lock, and route role handoffs (bind one to each idle pull
 * member, route stale bindings again, wake idle push members: route-by-role.ts). None of them waits on a provider, and none waits on
 * another: a slow one delays only its own next run. Observing UNCERTAIN handoffs is not among
 * them: it waits on providers, so it runs beside them (`UncertainObserver`).
 * Every step reads Postgres and is safe to run from several processes at once.
 */
export function reconcileSteps(
  deps: ReconcileStepsDeps,
  intervalMs: number,
  sweepMemory?: SweepMemory,
): Record<ReconcileStep, () => Promise<Partial<ReconcileReport>>> {
  return {
    holds: async () => ({ liftedHolds: await liftHolds(deps) }),
    reminders: async () => ({ reminders: (await sendReminders(deps)).length }),
    leases: async () => ({ expiredClaims: await expireLeases(deps) }),
    sweep: async () => ({ queuedAgents: await sweepOpenWork(deps, intervalMs, sweepMemory) }),
    routes: async () => ({ routed: await routeRoles(deps) }),
  };
}

/**
 * One whole reconciler pass, every step awaited in order (tests, and a one-off run): lift holds
 * that ended, send due deadline reminders, observe the UNCERTAIN deliveries that are due (with
 * bounded concurrency per provider: reconcile-uncertain.ts), expire claims whose lease ran out,
 * re-queue every agent with open work and no lock, and route role handoffs. The running reconciler
 * (workers/timers/start-reconciler.ts) runs the same steps apart instead, so no step waits on
 * an observation.
 */
export async function reconcileOnce(
  deps: ReconcileDeps,
  intervalMs: number,
  /** The leading process's memory between sweeps (sweep-open-work.ts); absent: none kept. */
  sweepMemory?: SweepMemory,
): Promise<ReconcileReport> {
  const steps = reconcileSteps(deps, intervalMs, sweepMemory);
  const report: ReconcileReport = { liftedHolds: 0, reminders: 0, uncertain: 0, expiredClaims: 0, queuedAgents: 0, routed: 0 };
  Object.assign(report, await steps.holds());
  Object.assign(report, await steps.reminders());
  report.uncertain = await reconcileUncertain(deps);
  Object.assign(report, await steps.leases());
  Object.assign(report, await steps.sweep());
  Object.assign(report, await steps.routes());
  return report;
}
