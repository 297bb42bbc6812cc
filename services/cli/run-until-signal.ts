import type { Logger } from '../../libs/logging/create-logger.ts';

/**
 * Keeps the process up until SIGTERM or SIGINT, then runs `stop` once and exits 0. A second
 * signal while stopping exits at once with 1.
 */
export function runUntilSignal(stop: () => Promise<void>, logger: Logger): Promise<never> {
  return new Promise<never>(() => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        logger.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      stopping = true;
      logger.info({ signal }, 'stopping');
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
