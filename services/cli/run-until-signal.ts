import type { Logger } from '../../libs/logging/create-logger.ts';
import { CLI_DEFAULTS } from '../../libs/config/component-defaults.ts';

/**
 * Keeps the process up until SIGTERM or SIGINT, then runs `stop` once and exits 0 (1 if it
 * failed or had to force-close). A second signal while stopping exits at once with 1. With
 * `graceMs` (the bound `stop` keeps), the process exits 1 anyway CLI_DEFAULTS.shutdownBackstopMs after that
 * (a stuck force-close must not keep the process up).
 */
export function runUntilSignal(stop: () => Promise<void>, logger: Logger, graceMs?: number): Promise<never> {
  return new Promise<never>(() => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        logger.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      stopping = true;
      logger.info({ signal }, 'stopping');
      if (graceMs !== undefined) {
        setTimeout(() => {
          logger.error({ graceMs }, 'shutdown still not over after the grace: exiting');
          process.exit(1);
        }, graceMs + CLI_DEFAULTS.shutdownBackstopMs).unref();
      }
      stop().then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ err }, 'error while stopping');
          process.exit(1);
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
