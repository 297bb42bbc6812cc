import os from 'node:os';
import type { Redis } from 'ioredis';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { DemoAgentHost, type DemoHostPort } from '../../libs/adapters/demo/demo-agent-host.ts';
import { DemoHostClient } from '../../libs/adapters/demo/demo-host-client.ts';
import type { BatonConfig } from '../../libs/config/load-config.ts';
import { systemClock, type Clock } from '../../libs/domain/clock.ts';
import { migrate } from '../../libs/db/migrate.ts';
import { openDatabase, type Database } from '../../libs/db/open-database.ts';
import { createRepositories } from '../../libs/db/repositories.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import { openRedis } from '../../libs/queue/open-redis.ts';
import { startApiServer, type RunningApi } from '../api/server.ts';
import { bootstrapAdminToken } from './admin-token.ts';
import { startDeliveryWorker, type RunningDeliveryWorker } from '../../workers/delivery/start-delivery-worker.ts';
import { startReconciler } from '../../workers/timers/start-reconciler.ts';

export interface StackOptions {
  readonly config: BatonConfig;
  readonly logger: Logger;
  readonly api: boolean;
  readonly worker: boolean;
  /** Simulated sessions in this process (the demo); otherwise BATON_DEMO_HOST_URL or a private host. */
  readonly demoHost?: DemoHostPort;
  readonly clock?: Clock;
  readonly workerId?: string;
  /** With the API: create and write the first admin token on a fresh database (default true). */
  readonly bootstrapAdmin?: boolean;
}

export interface RunningStack {
  readonly db: Database;
  readonly api: RunningApi | undefined;
  readonly worker: RunningDeliveryWorker | undefined;
  stop(): Promise<void>;
}

/**
 * Starts the API and/or a delivery worker (with its reconciler) in this process, in order:
 * migrate, open Postgres and Redis, listen / consume. `stop()` undoes it in reverse: stop
 * taking work, finish or hand back live turns, close queues, Redis and Postgres.
 */
export async function startStack(opts: StackOptions): Promise<RunningStack> {
  const { config, logger } = opts;
  if (!config.databaseUrl) throw new Error('DATABASE_URL is not set (postgresql://user@host:5432/db)');
  if (!config.redisUrl) throw new Error('REDIS_URL is not set (redis://host:6379)');
  const clock = opts.clock ?? systemClock;
  const applied = await migrate(config.databaseUrl);
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  // Named per process, so pg_stat_activity shows which process holds which connections.
  const role = opts.api && opts.worker ? 'serve' : opts.api ? 'api' : 'worker';
  const db = openDatabase({ url: config.databaseUrl, poolSize: config.dbPoolSize, logger, applicationName: `baton-${role}-${process.pid}` });
  const repos = createRepositories(db);
  const connections: Redis[] = [];
  let api: RunningApi | undefined;
  let worker: RunningDeliveryWorker | undefined;
  let reconciler: { stop(): Promise<void> } | undefined;
  let demoClient: DemoHostClient | undefined;

  if (opts.worker) {
    const redis = openRedis(config.redisUrl, 'worker', logger);
    connections.push(redis);
    let demoHost = opts.demoHost;
    if (!demoHost && config.demoHostUrl) demoHost = demoClient = new DemoHostClient(config.demoHostUrl);
    demoHost ??= new DemoAgentHost();
    const adapters = createAdapters(config.workerProviders, { demoHost });
    worker = startDeliveryWorker({
      repos,
      redis,
      adapters,
      clock,
      logger,
      workerId: opts.workerId ?? `${os.hostname()}-${process.pid}`,
      redisPrefix: config.redisPrefix,
      queueShards: config.queueShards,
      concurrency: config.workerConcurrency,
      turnLockTtlMs: config.turnLockTtlMs,
      jobLockMs: config.jobLockMs,
      stalledIntervalMs: config.stalledIntervalMs,
      shutdownGraceMs: config.shutdownGraceMs,
    });
    reconciler = startReconciler({ ...worker.deps, locks: worker.locks }, config.reconcileIntervalMs, [...adapters.providers()].sort().join('+'));
  }
  if (opts.api) {
    if (opts.bootstrapAdmin !== false) await bootstrapAdminToken({ ...repos, clock, logger }, config);
    const redis = openRedis(config.redisUrl, 'producer', logger);
    connections.push(redis);
    api = await startApiServer({
      db,
      redis,
      clock,
      logger,
      host: config.api.host,
      port: config.api.port,
      redisPrefix: config.redisPrefix,
      queueShards: config.queueShards,
      defaultProject: config.defaultProject,
      rateLimit: config.rateLimit,
    });
  }

  let stopping: Promise<void> | undefined;
  return {
    db,
    api,
    worker,
    stop() {
      stopping ??= (async () => {
        await api?.close();
        await reconciler?.stop();
        await worker?.stop();
        demoClient?.close();
        await Promise.all(connections.map((c) => c.quit().catch(() => c.disconnect())));
        await db.close();
      })();
      return stopping;
    },
  };
}
