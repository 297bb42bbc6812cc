import { reconcileSteps, type ReconcileDeps, type ReconcileReport } from '../../libs/handoffs/reconcile-once.ts';
import { SweepMemory } from '../../libs/handoffs/sweep-open-work.ts';
import { UncertainObserver } from '../../libs/handoffs/uncertain-observer.ts';
import { isRedisConnectionError } from '../../libs/queue/redis-link.ts';
import { isDatabaseUnavailable } from '../../libs/db/classify-error.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import { RECONCILER_DEFAULTS } from '../../libs/config/component-defaults.ts';

/** A failing step is logged on its first failure and on every this-many-th after it. */
const LOG_EVERY_FAILURES = RECONCILER_DEFAULTS.logEveryFailures;

/** Failures in a row of one step (or of taking the lead), and whether any was logged as a warning. */
interface FailureRun {
  failures: number;
  warned: boolean;
}

/**
 * A failure on its first time and every LOG_EVERY_FAILURES-th: a warning, unless Redis or
 * Postgres could not be reached (debug: the process's RedisLink and DatabaseLink report such an
 * outage once, and its end).
 */
function logFailure(logger: Logger, run: FailureRun, err: unknown, fields: Record<string, unknown>, msg: string): void {
  run.failures++;
  if (isRedisConnectionError(err) || isDatabaseUnavailable(err)) logger.debug({ err, failures: run.failures, ...fields }, msg);
  else if (run.failures === 1 || run.failures % LOG_EVERY_FAILURES === 0) {
    logger.warn({ err, failures: run.failures, ...fields }, msg);
    run.warned = true;
  }
}

/** The end of a run of failures: a line only when one of them was logged as a warning. */
function logRecovery(logger: Logger, run: FailureRun, fields: Record<string, unknown>, msg: string): void {
  if (run.warned) logger.info({ failures: run.failures, ...fields }, msg);
  run.failures = 0;
  run.warned = false;
}

/** One step's runs: never two at once; its failures in a row. */
interface StepRuns extends FailureRun {
  running: Promise<void> | null;
}

const noActions = (): ReconcileReport => ({ liftedHolds: 0, reminders: 0, uncertain: 0, expiredClaims: 0, queuedAgents: 0, routed: 0 });

/**
 * Runs the reconciler every `intervalMs`, in one process at a time across the deployment's
 * workers of `group` (a lead key that expires after one interval). Each tick this process leads
 * starts every step of libs/handoffs/reconcile-once.ts whose previous run has ended (lift holds,
 * reminders, lease expiry, the sweep: each runs on its own, so none waits on another), and
 * fills the free observation slots of its `UncertainObserver` (UNCERTAIN handoffs, at most
 * OBSERVATIONS_PER_PROVIDER looks per provider at a time), whose looks run on without holding
 * up any tick. A step that fails (Postgres or Redis down) is logged and tried at the next tick:
 * that is how workers back off and resume.
 */
export function startReconciler(
  deps: ReconcileDeps & {
    locks: ReconcileDeps['locks'] & { tryLeadReconciler(group: string, holder: string, ms: number): Promise<boolean> };
  },
  intervalMs: number,
  /** Workers serving the same providers share one leader (e.g. "demo"). */
  group: string,
  /** Told, at each tick this process leads, what the steps finished since the last such tick did (the metrics' reconciler counters). */
  onPass?: (report: ReconcileReport) => void,
): { stop(): Promise<void> } {
  const stopping = new AbortController();
  const steps = reconcileSteps(deps, intervalMs, new SweepMemory());
  const observer = new UncertainObserver(deps, stopping.signal);
  const runs = new Map<string, StepRuns>();
  let done = noActions();
  let leading: Promise<void> | null = null;
  const lead: FailureRun = { failures: 0, warned: false };

  const run = (name: string, step: () => Promise<Partial<ReconcileReport>>) => {
    let found = runs.get(name);
    if (!found) runs.set(name, (found = { running: null, failures: 0, warned: false }));
    if (found.running) return;
    const l = found;
    l.running = step()
      .then(
        (report) => {
          for (const [key, n] of Object.entries(report) as Array<[keyof ReconcileReport, number]>) done[key] += n;
          logRecovery(deps.logger, l, { step: name }, 'reconciler step recovered');
        },
        (err: unknown) => {
          logFailure(deps.logger, l, err, { step: name }, 'reconciler step failed');
        },
      )
      .finally(() => {
        l.running = null;
      });
  };

  const tick = () => {
    if (leading || stopping.signal.aborted) return;
    // One process leads each interval; the others skip it (every step is safe in parallel, but
    // there is no point in several processes scanning the same histories).
    leading = deps.locks
      .tryLeadReconciler(group, deps.workerId, intervalMs)
      .then(
        (leads) => {
          logRecovery(deps.logger, lead, {}, 'reconciler recovered');
          if (!leads || stopping.signal.aborted) return;
          for (const [name, step] of Object.entries(steps)) run(name, step);
          // Starts looks in the free slots and returns: what they did is counted as they end.
          run('observe', async () => {
            await observer.fill();
            return {};
          });
          const report = { ...done, uncertain: done.uncertain + observer.takeTouched() };
          done = noActions();
          onPass?.(report);
        },
        (err: unknown) => {
          logFailure(deps.logger, lead, err, {}, 'reconciler pass failed');
        },
      )
      .finally(() => {
        leading = null;
      });
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  tick();
  return {
    async stop() {
      clearInterval(timer);
      // Looks in flight are cut short: they write nothing, and the handoffs stay due.
      stopping.abort(new Error('the reconciler is stopping'));
      await leading;
      await Promise.all([...runs.values()].map((l) => l.running).filter((p) => p !== null));
      await observer.idle();
    },
  };
}
