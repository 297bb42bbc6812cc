import net from 'node:net';
import type { BatonConfig } from '../../libs/config/load-config.ts';
import { listenStartupError, StartupError } from './startup-error.ts';

/**
 * Resolves when `host:port` can be listened on now; rejects with listen's own error
 * (EADDRINUSE, EACCES, EADDRNOTAVAIL) otherwise. Port 0 (any free port) always can. It listens
 * for a moment and closes at once.
 */
export function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve()));
  });
}

/** A metrics port that cannot be listened on, as the one line `cannot start` prints. */
export function metricsPortError(err: unknown, host: string, port: number): StartupError {
  return new StartupError(`cannot serve metrics on ${host}:${port}: ${(err as Error).message}; set BATON_METRICS_PORT to a free port`, {
    cause: err,
  });
}

/**
 * Checks the ports a process is about to listen on, the API's (BATON_API_PORT) and, for a worker,
 * BATON_METRICS_PORT's: a busy one is the whole answer, so it is found before any module is
 * loaded or connection opened (nothing else can then add to the message, or delay it).
 * Only node:net here: the process commands call it before they load the server side.
 * @throws StartupError (a busy port names BATON_API_PORT or BATON_METRICS_PORT).
 */
export async function checkPorts(config: BatonConfig, roles: { readonly api: boolean; readonly worker: boolean }): Promise<void> {
  const host = config.api.host;
  if (roles.api)
    await assertPortFree(host, config.api.port).catch((err: unknown) => Promise.reject(listenStartupError(err, host, config.api.port)));
  const metricsPort = config.metricsPort;
  if (roles.worker && metricsPort !== undefined)
    await assertPortFree(host, metricsPort).catch((err: unknown) => Promise.reject(metricsPortError(err, host, metricsPort)));
}
