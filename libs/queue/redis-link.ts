import { briefError, type Logger } from '../logging/create-logger.ts';

/** Socket-level codes: the way to Redis failed, not a command. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'ECONNABORTED',
]);

/** What ioredis and BullMQ say when a command could not reach Redis (no code on these). */
const NO_LINK =
  /Connection is closed|Stream isn't writeable|Reached the max retries per request|Command timed out|connect ETIMEDOUT|LOADING |ClusterAllFailedError|Failed to refresh slots cache|None of startup nodes is available/i;

/**
 * Whether `err` says Redis could not be reached (refused, reset, timed out, closed while
 * reconnecting), not that a command failed on a server that answered. These are expected
 * while Redis is away and are reported once by RedisLink, not one by one.
 */
export function isRedisConnectionError(err: unknown): boolean {
  const e = err as { code?: unknown; name?: unknown; message?: unknown } | undefined;
  if (typeof e?.code === 'string' && NETWORK_CODES.has(e.code)) return true;
  if (e?.name === 'MaxRetriesPerRequestError') return true;
  return typeof e?.message === 'string' && NO_LINK.test(e.message);
}

/**
 * Logs an error event of a BullMQ Worker or Queue: a warning, unless it only says Redis cannot be
 * reached (then debug: the process's RedisLink reports the outage once).
 */
export function logQueueError(logger: Logger, err: unknown, fields: Record<string, unknown>, msg: string): void {
  if (isRedisConnectionError(err)) logger.debug({ err, ...fields }, msg);
  else logger.warn({ err, ...fields }, msg);
}

/**
 * What RedisLink follows of a connection (an ioredis client or cluster client, open-redis.ts):
 * its connection events. Declared here so that open-redis.ts, which creates the link, is not
 * imported back (no import cycles in libs/).
 */
export interface WatchedConnection {
  on(event: 'error' | 'ready' | 'end', listener: (...args: unknown[]) => void): unknown;
}

/**
 * A process's view of its way to Redis, over every connection it opened (openRedis and
 * duplicateRedis register them). When the first connection fails it logs one warning
 * (`redis connection lost`); when every connection that failed is ready again it logs one
 * `redis connection restored` with how long Redis was away. The failed reconnect attempts in
 * between (ioredis backs off up to 2 s between them, open-redis.ts) log nothing above debug.
 * A connection closed on purpose leaves the count without a line.
 */
export class RedisLink {
  private readonly failing = new Set<WatchedConnection>();
  private lostAt: number | undefined;
  private waiters: Array<() => void> = [];

  constructor(private readonly logger: Logger) {}

  /** Follows `client`'s connection events; `role` names it in the lines. */
  watch(client: WatchedConnection, role: string): void {
    client.on('error', (err: unknown) => this.failed(client, role, err));
    client.on('ready', () => this.ready(client, role));
    client.on('end', () => this.ended(client));
  }

  /** Whether some connection of this process cannot reach Redis now. */
  get down(): boolean {
    return this.failing.size > 0;
  }

  /** Resolves once some connection cannot reach Redis (at once if one cannot now). */
  whenDown(): Promise<void> {
    if (this.down) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private failed(client: WatchedConnection, role: string, err: unknown): void {
    this.logger.debug({ err, role }, 'redis connection error');
    const wasDown = this.down;
    this.failing.add(client);
    if (wasDown) return;
    this.lostAt = Date.now();
    this.logger.warn({ role, err: briefError(err) }, 'redis connection lost: retrying with back-off');
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private ready(client: WatchedConnection, role: string): void {
    if (!this.failing.delete(client) || this.down) return;
    this.logger.info({ role, downMs: Date.now() - (this.lostAt ?? Date.now()) }, 'redis connection restored');
  }

  private ended(client: WatchedConnection): void {
    this.failing.delete(client);
  }
}
