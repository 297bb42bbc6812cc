import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { RedisClient } from '../../libs/queue/open-redis.ts';
import { pino } from 'pino';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import type { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import { DemoAgentHost, type DemoHostPort } from '../../libs/adapters/demo/demo-agent-host.ts';
import { systemClock, type Clock } from '../../libs/domain/clock.ts';
import { openDatabase, type Database } from '../../libs/db/open-database.ts';
import { createRepositories, type Repositories } from '../../libs/db/repositories.ts';
import type { CoreDeps } from '../../libs/handoffs/ports.ts';
import { createLogger, type Logger } from '../../libs/logging/create-logger.ts';
import { DeliveryQueues } from '../../libs/queue/delivery-queues.ts';
import { deleteKeys, openRedis, scanKeys } from '../../libs/queue/open-redis.ts';
import { TokenCache } from '../../libs/handoffs/token-cache.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { EventStreamPublisher } from '../../libs/queue/event-stream.ts';
import { buildApp } from '../../services/api/app.ts';
import { startApiServer } from '../../services/api/server.ts';
import { startDeliveryWorker, type RunningDeliveryWorker } from '../../workers/delivery/start-delivery-worker.ts';
import { TEST_REDIS_URL } from './env.ts';
import type { WorkerHooks } from '../../libs/handoffs/dispatch-deps.ts';
import { DEFAULT_DELIVERY_WINDOWS, type DeliveryWindows } from '../../libs/domain/delivery-policy.ts';
import { reconcileOnce, type ReconcileReport } from '../../libs/handoffs/reconcile-once.ts';
import { SweepMemory } from '../../libs/handoffs/sweep-open-work.ts';
import { createProviderStatusCheck } from '../../libs/adapters/provider-status.ts';
import { createTestDatabase } from './test-database.ts';
import { createToken } from '../../libs/handoffs/manage-tokens.ts';
import type { RateLimit } from '../../services/api/plugins/rate-limit.ts';
import { TurnLocks } from '../../libs/locks/turn-locks.ts';
import { MetricsRepository } from '../../libs/db/metrics-repository.ts';
import { createBatonMetrics, type BatonMetrics } from '../../libs/metrics/baton-metrics.ts';
import { installDeploymentMetrics } from '../../libs/metrics/deployment-metrics.ts';
import { BrowserSessions } from '../../services/api/plugins/browser-session.ts';
import type { EventStreamLimits } from '../../services/api/routes/events/index.ts';

export interface TestBaton {
  readonly app: FastifyInstance;
  readonly core: CoreDeps;
  readonly repos: Repositories;
  readonly db: Database;
  readonly databaseUrl: string;
  readonly redis: RedisClient;
  readonly prefix: string;
  readonly host: DemoAgentHost;
  readonly logger: Logger;
  /** The app's Prometheus registry (`GET /metrics`); reconcile() counts its passes here. */
  readonly metrics: BatonMetrics;
  /** An admin token; post/get/put/del send it unless given an `authorization` header. */
  readonly adminToken: string;
  /** Registers nothing: creates a token for an existing agent (default project: `default`). */
  tokenFor(agent: string, project?: string): Promise<string>;
  /** Starts a delivery worker in this process (several may run side by side). */
  /** `adapters`: what the worker runs (default: the demo adapter on `demoHost`, else this Baton's host). */
  startWorker(
    opts?: Partial<{
      workerId: string;
      turnLockTtlMs: number;
      demoHost: DemoHostPort;
      concurrency: number;
      outageRetryMs: number;
      adapters: AdapterRegistry;
      hooks: WorkerHooks;
      pools: readonly string[];
      windows: DeliveryWindows;
    }>,
  ): RunningDeliveryWorker;
  put(path: string, body: unknown): Promise<{ status: number; body: any }>;
  /** One reconciler pass (holds, reminders, UNCERTAIN scans, re-queue) with the newest worker's dependencies. */
  reconcile(): Promise<ReconcileReport>;
  /** POST/GET helpers over app.inject (no network), as the admin unless headers say otherwise (`authorization: ''` sends none). */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  get(path: string, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  del(path: string, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  /** Serves the API on a free 127.0.0.1 port (for the CLI, over HTTP); closed by stop(). Returns its URL. */
  listen(): Promise<string>;
  /** Event streams the servers started by listen() follow now. */
  streams(): number;
  stop(): Promise<void>;
}

export const silentLogger = (): Logger =>
  createLogger({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent', name: 'test' }, pino.destination(2));

/**
 * A real Baton for one test file: its own database (cloned from the migrated template), its
 * own Redis key prefix, the HTTP app (injected, no port), and in-process simulated sessions.
 * Nothing is mocked but the provider at the adapter edge.
 */
export async function startTestBaton(
  opts: {
    clock?: Clock;
    queueShards?: number;
    redisUrl?: string;
    rateLimit?: RateLimit;
    /** Redis prefix of the rate-limit counters (default: this Baton's own): give two Batons one to share a budget. */
    rateLimitPrefix?: string;
    logger?: Logger;
    /** BATON_TRUST_PROXY for the app (default off), and hostnames browsers may use beside the loopback names. */
    trustProxy?: boolean | readonly string[];
    /** Bounds of GET /v1/events (default: the documented ones). */
    eventStreamLimits?: EventStreamLimits;
    allowedHosts?: readonly string[];
    /**
     * The Redis prefix, which is also the deployment its API registers agents in and its workers
     * serve (default: a random one, so tests sharing a Redis never meet).
     */
    prefix?: string;
  } = {},
): Promise<TestBaton> {
  const redisUrl = opts.redisUrl ?? TEST_REDIS_URL;
  const database = await createTestDatabase();
  const logger = opts.logger ?? silentLogger();
  const db = openDatabase({ url: database.url, poolSize: 10, logger });
  const repos = createRepositories(db);
  const prefix = opts.prefix ?? `t${randomBytes(5).toString('hex')}`;
  const producer = openRedis(redisUrl, 'producer', logger);
  const redis = openRedis(redisUrl, 'worker', logger);
  await Promise.all([producer.ping(), redis.ping()]);
  const clock = opts.clock ?? systemClock;
  const queueShards = opts.queueShards ?? 2;
  // The reconciler's memory between sweeps, as the leading worker process keeps it.
  const sweepMemory = new SweepMemory();
  const queues = new DeliveryQueues({ connection: producer, names: new RedisNames(prefix), shards: queueShards, logger });
  // A token cache as the API process has one (its announcements go nowhere: one process).
  const core: CoreDeps = {
    ...repos,
    tokenCache: new TokenCache(),
    deployment: new RedisNames(prefix).deployment,
    scheduler: queues,
    events: new EventStreamPublisher(producer, new RedisNames(prefix), logger),
    clock,
    logger,
  };
  const names = new RedisNames(prefix);
  const metrics = createBatonMetrics();
  await installDeploymentMetrics(metrics, {
    repo: new MetricsRepository(db.pool),
    queues,
    locks: new TurnLocks(producer, names, { ttlMs: 1, logger }),
    logger,
  });
  const app = await buildApp({
    core,
    turnReports: repos.turnReports,
    logger,
    defaultProject: 'default',
    // Off unless a test asks: tests drive hundreds of calls through one token.
    rateLimit: opts.rateLimit
      ? { limit: opts.rateLimit, redis: producer, names: new RedisNames(opts.rateLimitPrefix ?? prefix) }
      : undefined,
    metrics,
    // Browser sessions as the server has them; app.inject's Host is `localhost`.
    browser: new BrowserSessions({
      redis: producer,
      names,
      allowedHosts: ['localhost', '127.0.0.1', '[::1]', ...(opts.allowedHosts ?? [])],
    }),
    ...(opts.trustProxy !== undefined ? { trustProxy: opts.trustProxy } : {}),
    ...(opts.eventStreamLimits ? { eventStreamLimits: opts.eventStreamLimits } : {}),
    queueBoard: {
      redis: producer,
      names,
      queueNames: async () =>
        (await new MetricsRepository(db.pool).providerPools()).flatMap((p) => queues.allQueueNames(p.provider, p.pool)),
    },
    checks: { database: async () => void (await db.pool.query('SELECT 1')), redis: async () => void (await producer.ping()) },
  });
  const host = new DemoAgentHost();
  const workers: RunningDeliveryWorker[] = [];
  const workerRedis: RedisClient[] = [];
  let n = 0;
  const servers: Array<{ close(): Promise<void>; streams(): number }> = [];
  const admin = await createToken(core, { admin: true, name: 'test admin' });
  const inject = async (
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    url: string,
    payload?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const withAuth: Record<string, string | undefined> =
      'authorization' in headers ? { ...headers } : { ...headers, authorization: `Bearer ${admin.token}` };
    if (withAuth['authorization'] === '') delete withAuth['authorization'];
    const res = await app.inject({ method, url, ...(payload !== undefined ? { payload: payload as object } : {}), headers: withAuth });
    return { status: res.statusCode, body: res.body === '' ? null : res.json() };
  };
  return {
    app,
    core,
    repos,
    db,
    databaseUrl: database.url,
    redis,
    prefix,
    host,
    logger,
    metrics,
    adminToken: admin.token,
    async tokenFor(agent, project) {
      return (await createToken(core, { admin: false, agent, project: project ?? 'default' })).token;
    },
    startWorker(o = {}) {
      const connection = openRedis(redisUrl, 'worker', logger);
      workerRedis.push(connection);
      const w = startDeliveryWorker({
        repos,
        redis: connection,
        adapters: o.adapters ?? createAdapters(['demo'], { demoHost: o.demoHost ?? host }),
        clock,
        logger,
        workerId: o.workerId ?? `test-worker-${++n}`,
        redisPrefix: prefix,
        queueShards,
        concurrency: o.concurrency ?? 8,
        turnLockTtlMs: o.turnLockTtlMs ?? 3_000,
        jobLockMs: 2_000,
        stalledIntervalMs: 1_000,
        shutdownGraceMs: 2_000,
        busyRetryMs: 100,
        unreachableRetryMs: 200,
        outageRetryMs: o.outageRetryMs ?? 200,
        recheckMs: 100,
        settingsMaxAgeMs: 0,
        outage: createProviderStatusCheck({ cacheMs: 0 }),
        ...(o.hooks ? { hooks: o.hooks } : {}),
        ...(o.pools ? { pools: o.pools } : {}),
        // Errored turns are resent after 50 ms unless a test gives its own windows: the default
        // back-off (30 s, then 2 min) would only slow tests that are about something else.
        windows: o.windows ?? { ...DEFAULT_DELIVERY_WINDOWS, errorResendDelayMs: 50 },
      });
      workers.push(w);
      return w;
    },
    reconcile() {
      // The newest worker: an older one may have been stopped by the test.
      const w = workers[workers.length - 1];
      if (!w) throw new Error('start a worker before reconciling');
      return reconcileOnce(w.deps, 1_000, sweepMemory).then((report) => {
        metrics.reconcilerPass(report);
        return report;
      });
    },
    post: (path, body, headers) => inject('POST', path, body, headers),
    get: (path, headers) => inject('GET', path, undefined, headers),
    put: (path, body) => inject('PUT', path, body),
    del: (path, headers) => inject('DELETE', path, undefined, headers),
    async listen() {
      const redis = openRedis(redisUrl, 'producer', logger);
      const api = await startApiServer({
        db,
        redis,
        clock,
        logger,
        host: '127.0.0.1',
        port: 0,
        redisPrefix: prefix,
        queueShards,
        defaultProject: 'default',
        rateLimit: opts.rateLimit ?? { perSecond: 0, burst: 1 },
        ...(opts.eventStreamLimits ? { eventStreamLimits: opts.eventStreamLimits } : {}),
      });
      servers.push({
        streams: () => api.streams(),
        async close() {
          await api.close();
          await redis.quit().catch(() => redis.disconnect());
        },
      });
      return api.url;
    },
    streams: () => servers.reduce((n, s) => n + s.streams(), 0),
    async stop() {
      await Promise.all(servers.map((s) => s.close()));
      await Promise.all(workers.map((w) => w.stop()));
      await app.close();
      await queues.close();
      host.close();
      await scanKeys(redis, `${prefix}:*`, deleteKeys);
      await Promise.all([producer, redis, ...workerRedis].map((r) => r.quit().catch(() => r.disconnect())));
      await db.close();
      await database.drop();
    },
  };
}
