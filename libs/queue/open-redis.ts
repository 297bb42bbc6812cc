import { Redis } from 'ioredis';
import type { Logger } from '../logging/create-logger.ts';

/**
 * Opens one Redis connection for a role:
 * - `producer` (API, CLI): gives up on a command after a reconnect attempt or 1.5 s, so a
 *   request never hangs on Redis; what was committed to Postgres is queued later by the reconciler.
 * - `worker`: waits and retries forever (BullMQ needs maxRetriesPerRequest: null for workers).
 * - `locks`: the turn locks of a worker: every command gives up after `commandTimeoutMs` (a
 *   third of the lock's lifetime), so a holder cut off from Redis learns it within the lock's
 *   lifetime instead of waiting forever.
 * Each process opens a fixed number of these, never one per agent.
 */
export function openRedis(url: string, role: 'producer' | 'worker' | 'locks', logger: Logger, opts: { commandTimeoutMs?: number } = {}): Redis {
  const redis = new Redis(url, {
    connectionName: `baton-${role}`,
    maxRetriesPerRequest: role === 'worker' ? null : 1,
    ...(role === 'producer' ? { commandTimeout: opts.commandTimeoutMs ?? 1_500 } : {}),
    ...(role === 'locks' ? { commandTimeout: opts.commandTimeoutMs ?? 1_000 } : {}),
    connectTimeout: 3_000,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2_000),
  });
  let reported = false;
  redis.on('error', (err) => {
    if (!reported) logger.warn({ err, role }, 'redis connection error');
    reported = true;
  });
  redis.on('ready', () => {
    if (reported) logger.info({ role }, 'redis connection restored');
    reported = false;
  });
  return redis;
}
