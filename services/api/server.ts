import type { SubscriptionAddressPolicy } from '../../libs/domain/subscription-policy.ts';
import type { TrustProxy } from '../../libs/config/api-hosts.ts';
import type { BatonConfig } from '../../libs/config/load-config.ts';
import type { EventStreamLimits } from './routes/events/index.ts';
import type { FastifyInstance } from 'fastify';
import { duplicateRedis, type RedisClient } from '../../libs/queue/open-redis.ts';
import type { Clock } from '../../libs/domain/clock.ts';
import type { Database } from '../../libs/db/open-database.ts';
import { createRepositories } from '../../libs/db/repositories.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import { DeliveryQueues } from '../../libs/queue/delivery-queues.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { TurnLocks } from '../../libs/locks/turn-locks.ts';
import { buildApp } from './app.ts';
import { EventStreamPublisher, createEventStreamReader } from '../../libs/queue/event-stream.ts';
import { EventFeed } from '../../libs/handoffs/event-feed.ts';
import { TokenCache } from '../../libs/handoffs/token-cache.ts';
import { AuthChanges } from '../../libs/queue/auth-changes.ts';
import type { RateLimit } from './plugins/rate-limit.ts';
import { MetricsRepository } from '../../libs/db/metrics-repository.ts';
import { createBatonMetrics, type BatonMetrics } from '../../libs/metrics/baton-metrics.ts';
import { installDeploymentMetrics } from '../../libs/metrics/deployment-metrics.ts';
import { BrowserSessions } from './plugins/browser-session.ts';

export interface ApiServerOptions {
  readonly db: Database;
  /** A producer connection (fails fast when Redis is down). */
  readonly redis: RedisClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly host: string;
  readonly port: number;
  readonly redisPrefix: string;
  readonly queueShards: number;
  readonly defaultProject: string;
  /** BATON_SUBSCRIPTION_ADDRESSES: which subscription URLs are accepted (default `no-private`). */
  readonly subscriptionAddresses?: SubscriptionAddressPolicy | undefined;
  /** Per-token request rate, shared through Redis by every API process (perSecond 0 turns it off). */
  readonly rateLimit?: RateLimit | undefined;
  /** The process's registry, when something else in it (a worker's reconciler) adds to it; else a new one. */
  readonly metrics?: BatonMetrics | undefined;
  /** Hostnames browsers may use (`BATON_ALLOWED_HOSTS`); default the loopback names and `host`. */
  readonly allowedHosts?: readonly string[] | undefined;
  /** The session cookie's Secure attribute even over plain HTTP (`BATON_URL` is https: TLS ends in front). */
  readonly secureCookies?: boolean | undefined;
  /** `BATON_TRUST_PROXY`: believe a reverse proxy's X-Forwarded-* headers (app.ts). */
  readonly trustProxy?: TrustProxy | undefined;
  /** Bounds of GET /v1/events (tests shorten them); the documented defaults otherwise. */
  readonly eventStreamLimits?: EventStreamLimits | undefined;
}

export interface RunningApi {
  readonly app: FastifyInstance;
  readonly url: string;
  /** Event streams (`GET /v1/events`) this process follows now. */
  streams(): number;
  /** Stops accepting requests, lets in-flight ones finish, closes the producer queues. */
  close(): Promise<void>;
}

/** Builds the app from real dependencies and listens; a failed listen (EADDRINUSE) closes the app and its queues and rethrows. */
export async function startApiServer(opts: ApiServerOptions): Promise<RunningApi> {
  const names = new RedisNames(opts.redisPrefix);
  // The pending wake-ups get a connection of their own: a pipeline copies every command its
  // connection defines, and the shared one carries BullMQ's 64 scripts (docs/performance-history.md,
  // "Redis at 10,000 agents: 16 -> 11 commands per handoff").
  const lockRedis = duplicateRedis(opts.redis, { connectionName: 'baton-locks' });
  lockRedis.on('error', (err) => opts.logger.debug({ err }, 'pending-wake-up connection error'));
  const locks = new TurnLocks(lockRedis, names, { ttlMs: 1, logger: opts.logger });
  const queues = new DeliveryQueues({
    connection: opts.redis,
    names,
    shards: opts.queueShards,
    logger: opts.logger,
    heldLocks: (ids) => locks.wakeHolderIfHeld(ids),
  });
  const repos = createRepositories(opts.db);
  const metrics = opts.metrics ?? createBatonMetrics();
  const metricsRepo = new MetricsRepository(opts.db.pool);
  await installDeploymentMetrics(metrics, { repo: metricsRepo, queues, locks, logger: opts.logger });
  const browser = new BrowserSessions({
    redis: opts.redis,
    names,
    allowedHosts: opts.allowedHosts ?? ['localhost', '127.0.0.1', '[::1]', opts.host.includes(':') ? `[${opts.host}]` : opts.host],
    secureCookies: opts.secureCookies,
  });
  // Bull Board shows every delivery queue that can hold jobs: each shard of every provider and
  // pool that has agents.
  const queueNames = async () => (await metricsRepo.providerPools()).flatMap((p) => queues.allQueueNames(p.provider, p.pool));
  // Token look-ups are cached for at most a second per process; a revocation empties this
  // process's cache at once and the others' over Redis pub/sub (token-cache.ts).
  const authChanges = new AuthChanges({
    publisher: opts.redis,
    subscriber: duplicateRedis(opts.redis, { connectionName: 'baton-auth', maxRetriesPerRequest: null, commandTimeout: undefined }),
    names,
    logger: opts.logger,
  });
  const tokenCache = new TokenCache({ announce: () => authChanges.announce() });
  void authChanges.start(() => tokenCache.forget());
  const core = {
    ...repos,
    tokenCache,
    deployment: names.deployment,
    scheduler: queues,
    events: new EventStreamPublisher(opts.redis, names, opts.logger),
    subscriptionAddresses: opts.subscriptionAddresses,
    clock: opts.clock,
    logger: opts.logger,
  };
  // GET /v1/events: one stream reader per process (its own connection: XREAD BLOCK outlasts the
  // producer's command timeout), opened by the first follower.
  const feed = new EventFeed({
    log: repos.eventLog,
    wakeups: () =>
      createEventStreamReader(
        duplicateRedis(opts.redis, { connectionName: 'baton-events', maxRetriesPerRequest: null, commandTimeout: 15_000 }),
        names,
        opts.logger,
      ),
    clock: opts.clock,
    logger: opts.logger,
  });
  const app = await buildApp({
    core,
    turnReports: repos.turnReports,
    defaultProject: opts.defaultProject,
    logger: opts.logger,
    feed,
    rateLimit: opts.rateLimit ? { limit: opts.rateLimit, redis: opts.redis, names } : undefined,
    metrics,
    browser,
    trustProxy: opts.trustProxy,
    eventStreamLimits: opts.eventStreamLimits,
    queueBoard: { redis: opts.redis, names, queueNames },
    outages: { databaseDown: () => opts.db.link.down },
    checks: {
      database: async () => {
        await opts.db.pool.query('SELECT 1');
      },
      redis: async () => {
        await opts.redis.ping();
      },
    },
  });
  let address: string;
  try {
    address = await app.listen({ host: opts.host, port: opts.port });
  } catch (err) {
    // A busy port: leave nothing open behind the error, so the caller can exit cleanly.
    await app.close().catch(() => undefined);
    await queues.close().catch(() => undefined);
    authChanges.close();
    lockRedis.disconnect();
    throw err;
  }
  opts.logger.info({ url: address }, 'api listening');
  return {
    app,
    url: address.replace('0.0.0.0', '127.0.0.1').replace('[::]', '127.0.0.1'),
    streams: () => feed.size,
    async close() {
      await app.close();
      await queues.close();
      authChanges.close();
      lockRedis.disconnect();
    },
  };
}

/** What `startConfiguredApi` is given: the process's connections, clock and metrics, and its loaded config. */
export interface ConfiguredApiParts {
  readonly config: BatonConfig;
  readonly db: Database;
  readonly redis: RedisClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: BatonMetrics;
}

/**
 * The API as `baton serve`, `api` and `demo` start it (the `baton` entry point hands this to
 * services/cli's startStack): its settings from the config (BATON_API_*, the rate limit, the
 * deployment's prefix and shards, the default project).
 */
export function startConfiguredApi({ config, ...parts }: ConfiguredApiParts): Promise<RunningApi> {
  return startApiServer({
    ...parts,
    host: config.api.host,
    port: config.api.port,
    redisPrefix: config.redisPrefix,
    queueShards: config.queueShards,
    defaultProject: config.defaultProject,
    subscriptionAddresses: config.subscriptionAddresses,
    rateLimit: config.rateLimit,
    allowedHosts: config.api.allowedHosts,
    secureCookies: config.api.publicUrl.startsWith('https:'),
    trustProxy: config.api.trustProxy,
  });
}
