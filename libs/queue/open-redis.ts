import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Logger } from '../logging/create-logger.ts';
import { RedisLink } from './redis-link.ts';
import { parseRedisTarget, type RedisTarget } from '../config/redis-target.ts';
import { REDIS_CLIENT_DEFAULTS } from '../config/component-defaults.ts';

/**
 * A connection to Baton's Redis: one server, or a Redis Cluster (`redis+cluster://` URL, see
 * redis-target.ts). Code that takes one never sends a multi-key command or pipeline whose keys
 * lie in different hash slots: every key comes from RedisNames with a hash tag.
 */
export type RedisClient = Redis | Cluster;

export type RedisRole = 'producer' | 'worker' | 'locks';

/** The per-connection options a role needs; the same for a single server and each cluster node. */
function roleOptions(role: RedisRole, opts: { commandTimeoutMs?: number }): RedisOptions {
  return {
    connectionName: `baton-${role}`,
    maxRetriesPerRequest: role === 'worker' ? null : 1,
    ...(role === 'producer' ? { commandTimeout: opts.commandTimeoutMs ?? REDIS_CLIENT_DEFAULTS.producerCommandTimeoutMs } : {}),
    ...(role === 'locks' ? { commandTimeout: opts.commandTimeoutMs ?? REDIS_CLIENT_DEFAULTS.lockCommandTimeoutMs } : {}),
    connectTimeout: REDIS_CLIENT_DEFAULTS.connectTimeoutMs,
  };
}

const retryStrategy = (times: number) => Math.min(50 * 2 ** Math.min(times, 6), REDIS_CLIENT_DEFAULTS.maxReconnectDelayMs);

/**
 * Opens one Redis connection (or one cluster client) for a role:
 * - `producer` (API, CLI): gives up on a command after a reconnect attempt or 1.5 s, so a
 *   request never hangs on Redis; what was committed to Postgres is queued later by the reconciler.
 * - `worker`: waits and retries forever (BullMQ needs maxRetriesPerRequest: null for workers).
 * - `locks`: the turn locks of a worker: every command gives up after `commandTimeoutMs` (a
 *   third of the lock's lifetime), so a holder cut off from Redis learns it within the lock's
 *   lifetime instead of waiting forever.
 * Each process opens a fixed number of these, never one per agent. On a cluster, a client holds
 * one connection per node it talks to.
 *
 * `link`: the process's RedisLink, which this connection and every duplicateRedis of it report
 * to, so an outage is one line for the process when it starts and one when it ends; without
 * one, the connection gets a link of its own.
 */
export function openRedis(
  url: string,
  role: RedisRole,
  logger: Logger,
  opts: { commandTimeoutMs?: number; link?: RedisLink } = {},
): RedisClient {
  const target = parseRedisTarget(url);
  const redis: RedisClient =
    target.kind === 'single'
      ? new Redis(target.url, { ...roleOptions(role, opts), retryStrategy })
      : new Cluster(
          target.nodes.map((n) => ({ host: n.host, port: n.port })),
          {
            redisOptions: {
              ...roleOptions(role, opts),
              ...(target.username !== undefined ? { username: target.username } : {}),
              ...(target.password !== undefined ? { password: target.password } : {}),
              ...(target.tls ? { tls: {} } : {}),
            },
            clusterRetryStrategy: retryStrategy,
            slotsRefreshTimeout: 2_000,
          },
        );
  watchLink(redis, opts.link ?? new RedisLink(logger), role);
  return redis;
}

/** Which RedisLink each connection reports to, so its duplicates report to the same one. */
const links = new WeakMap<RedisClient, RedisLink>();

function watchLink(client: RedisClient, link: RedisLink, role: string): void {
  links.set(client, link);
  link.watch(client, role);
}

/**
 * A second connection like `client` with some options changed (a cluster client takes them
 * per node, under `redisOptions`). `autoPipelining`: the commands issued in one turn of the
 * event loop go out in one write (ioredis's auto-pipelining; a cluster groups them per node).
 */
export function duplicateRedis(
  client: RedisClient,
  overrides: Pick<RedisOptions, 'connectionName' | 'maxRetriesPerRequest' | 'commandTimeout'>,
  opts: { autoPipelining?: boolean } = {},
): RedisClient {
  const pipelining = opts.autoPipelining ? { enableAutoPipelining: true } : {};
  const copy =
    client instanceof Cluster
      ? client.duplicate(undefined, { ...pipelining, redisOptions: { ...client.options.redisOptions, ...overrides } })
      : client.duplicate({ ...overrides, ...pipelining });
  const link = links.get(client);
  if (link) watchLink(copy, link, overrides.connectionName ?? 'duplicate');
  return copy;
}

/**
 * The servers that hold keys: the one server, or every primary of a cluster (once the cluster
 * client has learned them: a client that just opened knows no nodes yet).
 */
export async function keyServers(client: RedisClient, timeoutMs = REDIS_CLIENT_DEFAULTS.clusterReadyTimeoutMs): Promise<Redis[]> {
  if (!(client instanceof Cluster)) return [client];
  if (client.status !== 'ready') {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        client.off('ready', ready);
        reject(new Error(`the Redis Cluster was not ready within ${timeoutMs} ms`));
      }, timeoutMs);
      const ready = () => {
        clearTimeout(timer);
        resolve();
      };
      client.once('ready', ready);
    });
  }
  return client.nodes('master');
}

/**
 * Every key matching `pattern`, batch by batch (SCAN on each server that holds keys). `onBatch`
 * gets the keys with the server they live on, e.g. to delete them there one slot at a time.
 */
export async function scanKeys(
  client: RedisClient,
  pattern: string,
  onBatch: (keys: string[], server: Redis) => Promise<void>,
  count = REDIS_CLIENT_DEFAULTS.scanCount,
): Promise<void> {
  for (const server of await keyServers(client)) {
    let cursor = '0';
    do {
      const [next, keys] = await server.scan(cursor, 'MATCH', pattern, 'COUNT', count);
      cursor = next;
      if (keys.length > 0) await onBatch(keys, server);
    } while (cursor !== '0');
  }
}

/**
 * Deletes keys one by one on `server`, sent together (no multi-key DEL: on a cluster the keys
 * of one batch lie in many slots).
 */
export async function deleteKeys(keys: readonly string[], server: Redis): Promise<void> {
  await Promise.all(keys.map((k) => server.unlink(k)));
}

/**
 * A connection that tries once, every step bounded by `timeoutMs`, to the one server of a
 * single-server target or to `node` of a cluster; errors come from its calls only.
 */
function probeNode(target: RedisTarget, node: { host: string; port: number } | null, timeoutMs: number): Redis {
  const options: RedisOptions = {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    connectionName: 'baton-probe',
  };
  if (target.kind === 'cluster' && node === null) throw new Error('probeNode: a cluster node must be named');
  const probe =
    target.kind === 'single'
      ? new Redis(target.url, options)
      : new Redis(node!.port, node!.host, {
          ...options,
          ...(target.username !== undefined ? { username: target.username } : {}),
          ...(target.password !== undefined ? { password: target.password } : {}),
          ...(target.tls ? { tls: {} } : {}),
        });
  probe.on('error', () => undefined);
  return probe;
}

/**
 * Closes a probe. One whose connection already ended (refused, and no retry) is left alone:
 * ioredis's disconnect() would arm a 2 s timer (disconnectTimeout) for a socket that never
 * closes again, holding a failing start's exit back by that long.
 */
function closeProbe(probe: Redis): void {
  if (probe.status !== 'end') probe.disconnect();
}

/**
 * Whether Redis answers a PING within `timeoutMs`: the one server, or any seed node of a
 * cluster. Tries once (the caller decides whether to try again).
 * @throws the connection's own error (ECONNREFUSED, a timeout, NOAUTH, ...) when none answers.
 */
export async function pingRedis(url: string, timeoutMs: number): Promise<void> {
  const target = parseRedisTarget(url);
  const nodes = target.kind === 'single' ? [null] : target.nodes;
  let failure: unknown;
  for (const node of nodes) {
    const probe = probeNode(target, node, timeoutMs);
    // A refused connection rejects connect() with "Connection is closed."; the socket error says why.
    let socketError: unknown;
    probe.on('error', (err) => (socketError ??= err));
    try {
      await probe.connect();
      await probe.ping();
      return;
    } catch (err) {
      failure = socketError ?? err;
    } finally {
      closeProbe(probe);
    }
  }
  throw failure;
}

/**
 * For a `redis+cluster://` URL: asks its seed nodes, once and briefly, whether they are nodes of
 * a Redis Cluster. Returns what is wrong when one answers that it is not (a single server given
 * as a cluster: the cluster client would retry forever, logging), else null; a seed that does
 * not answer is not judged here (Redis may be starting: the clients wait for it).
 */
export async function misconfiguredCluster(url: string, timeoutMs = REDIS_CLIENT_DEFAULTS.clusterCheckTimeoutMs): Promise<string | null> {
  const target = parseRedisTarget(url);
  if (target.kind !== 'cluster') return null;
  for (const node of target.nodes) {
    const probe = probeNode(target, node, timeoutMs);
    try {
      await probe.connect();
      await probe.call('CLUSTER', 'INFO');
    } catch (err) {
      const message = (err as Error).message ?? String(err);
      if (/cluster support disabled/i.test(message)) {
        return `REDIS_URL names a Redis Cluster (redis+cluster://) but ${node.host}:${node.port} is a single Redis server (cluster support disabled): use redis://${node.host}:${node.port} for one server, or give the nodes of a cluster`;
      }
    } finally {
      closeProbe(probe);
    }
  }
  return null;
}
