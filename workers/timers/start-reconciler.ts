import type { DispatchDeps } from '../../libs/handoffs/dispatch-agent.ts';
import { reconcileOnce, type ReconcileReport } from '../../libs/handoffs/reconcile-once.ts';
import { SweepMemory } from '../../libs/handoffs/sweep-open-work.ts';

/**
 * Runs the reconciler (libs/handoffs/reconcile-once.ts) every `intervalMs`, never two passes
 * at once in this process, and in one process at a time across the deployment (a lead key
 * that expires after one interval). Errors (Postgres or Redis down) are logged and the next tick tries
 * again: that is how workers back off and resume.
 */
export function startReconciler(
  deps: DispatchDeps & {
    locks: DispatchDeps['locks'] & {
      busy(agentIds: readonly string[]): Promise<boolean[]>;
      tryLeadReconciler(group: string, holder: string, ms: number): Promise<boolean>;
    };
  },
  intervalMs: number,
  /** Workers serving the same providers share one leader (e.g. "demo"). */
  group: string,
  /** Told what each pass this process led did (the metrics' reconciler counter). */
  onPass?: (report: ReconcileReport) => void,
): { stop(): Promise<void> } {
  let running: Promise<void> | null = null;
  let failures = 0;
  const sweepMemory = new SweepMemory();
  const tick = () => {
    if (running) return;
    // One process leads each interval; the others skip it (every step is safe in parallel, but
    // there is no point in several processes scanning the same histories).
    running = deps.locks
      .tryLeadReconciler(group, deps.workerId, intervalMs)
      .then(async (leading) => {
        if (leading) onPass?.(await reconcileOnce(deps, intervalMs, sweepMemory));
      })
      .then(() => {
        if (failures > 0) deps.logger.info({ failures }, 'reconciler recovered');
        failures = 0;
      })
      .catch((err: unknown) => {
        failures++;
        if (failures === 1 || failures % 30 === 0) deps.logger.warn({ err, failures }, 'reconciler pass failed');
      })
      .finally(() => {
        running = null;
      });
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  tick();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
