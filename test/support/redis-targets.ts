import { inject } from 'vitest';
import { TEST_REDIS_URL } from './env.ts';

/**
 * The Redis setups the queue, lock, reconciler and end-to-end delivery tests run on: the
 * machine's single server, and the real 3-primary cluster global-setup.ts starts on loopback
 * (or `TEST_REDIS_CLUSTER_URL`). Use with `describe.each(REDIS_TARGETS)('... ($name)', ...)`.
 */
export const REDIS_TARGETS: ReadonlyArray<{ readonly name: string; readonly url: string }> = [
  { name: 'single redis', url: TEST_REDIS_URL },
  { name: 'redis cluster', url: inject('redisClusterUrl') },
];

/** The cluster only, for tests that are about it. */
export const clusterUrl = (): string => inject('redisClusterUrl');
