import type { Clock } from '../../libs/domain/clock.ts';
import { sweepOpenWork, type SweepDeps } from '../../libs/handoffs/sweep-open-work.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';

/**
 * Runs the reconciler's sweep every `intervalMs` (never two at once in this process). Errors
 * (Postgres or Redis down) are logged and the next tick tries again: that is how workers back
 * off and resume.
 */
export function startReconciler(deps: SweepDeps & { clock: Clock; logger: Logger }, intervalMs: number): { stop(): Promise<void> } {
  let running: Promise<void> | null = null;
  let failures = 0;
  const tick = () => {
    if (running) return;
    running = sweepOpenWork(deps, intervalMs)
      .then(() => {
        if (failures > 0) deps.logger.info({ failures }, 'reconciler sweep recovered');
        failures = 0;
      })
      .catch((err: unknown) => {
        failures++;
        if (failures === 1 || failures % 30 === 0) deps.logger.warn({ err, failures }, 'reconciler sweep failed');
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
