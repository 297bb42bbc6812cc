import os from 'node:os';
import type { RedisClient } from '../../libs/queue/open-redis.ts';
import type { DemoHostPort } from '../../libs/adapters/demo/demo-agent-host.ts';
import type { DemoHostClient } from '../../libs/adapters/demo/demo-host-client.ts';
import type { BatonConfig } from '../../libs/config/load-config.ts';
import { systemClock, type Clock } from '../../libs/domain/clock.ts';
import { migrate } from '../../libs/db/migrate.ts';
import { openDatabase, type Database } from '../../libs/db/open-database.ts';
import { createRepositories } from '../../libs/db/repositories.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import { misconfiguredCluster, openRedis } from '../../libs/queue/open-redis.ts';
import { RedisLink } from '../../libs/queue/redis-link.ts';
import type { ApiLauncher, StartedApi } from './launchers.ts';
import { bootstrapAdminToken } from './admin-token.ts';
import { isPostgresFailure, listenStartupError, postgresStartupError, StartupError } from './startup-error.ts';
import { awaitDependencies } from './start-checks.ts';
import { checkPorts, metricsPortError } from './check-ports.ts';
import type { RunningDeliveryWorker } from '../../workers/delivery/start-delivery-worker.ts';
import { createBatonMetrics } from '../../libs/metrics/baton-metrics.ts';
import type { RunningMetricsServer } from '../../libs/metrics/serve-metrics.ts';

export interface StackOptions {
  readonly config: BatonConfig;
  readonly logger: Logger;
  readonly api: boolean;
  readonly worker: boolean;
  /** Starts the API server (services/api), handed in by the `baton` entry point; needed with `api`. */
  readonly startApi?: ApiLauncher | undefined;
  /** Simulated sessions in this process (the demo); otherwise BATON_DEMO_HOST_URL or a private host. */
  readonly demoHost?: DemoHostPort;
  readonly clock?: Clock;
  readonly workerId?: string;
  /** With the API: create and write the first admin token on a fresh database (default true). */
  readonly bootstrapAdmin?: boolean;
}

export interface RunningStack {
  readonly db: Database;
  readonly api: StartedApi | undefined;
  readonly worker: RunningDeliveryWorker | undefined;
  stop(): Promise<void>;
}

/** Why a close step gave up: the grace is over, Redis is away (nothing to wait for), or the step itself failed. */
type StepOutcome = 'done' | 'failed' | 'timed out' | 'redis down';

/**
 * Starts the API and/or a delivery worker (with its reconciler) in this process, in order:
 * check that the API's (and metrics') port is free, wait for Postgres and Redis to answer
 * (BATON_START_TIMEOUT_MS), migrate, open Postgres and Redis, listen, then consume. A busy port
 * is found before any connection opens, so it starts nothing; a start that fails closes what it
 * opened and throws a StartupError (one line with a hint: `createdb`, the URL, BATON_API_PORT).
 *
 * Once started, a Redis outage is one `redis connection lost` line and one `redis connection
 * restored` (RedisLink), whatever the number of connections and failed reconnects.
 *
 * `stop()` undoes it in reverse: stop taking requests and work, let live turns finish, hand back
 * the rest, close queues, Redis and Postgres, all within BATON_SHUTDOWN_GRACE_MS. Each step
 * gets what is left of the grace; when it runs out (Postgres down: its commands wait), or at
 * once when Redis is away (BullMQ would wait for a reconnect), the rest is force-closed and
 * stop() rejects, so the process exits 1.
 */
export async function startStack(opts: StackOptions): Promise<RunningStack> {
  const { config, logger } = opts;
  if (!config.databaseUrl) throw new Error('DATABASE_URL is not set (postgresql://user@host:5432/db)');
  if (!config.redisUrl) throw new Error('REDIS_URL is not set (redis://host:6379)');
  const startApi = opts.api ? opts.startApi : undefined;
  if (opts.api && !startApi) throw new Error('startStack: the API needs startApi (services/api; the `baton` entry point hands it in)');
  const databaseUrl = config.databaseUrl;
  const redisUrl = config.redisUrl;
  const clock = opts.clock ?? systemClock;
  // Ports first: a busy one is the whole answer, before any connection could add noise to it.
  await checkPorts(config, opts);
  await awaitDependencies({ databaseUrl, redisUrl, timeoutMs: config.startTimeoutMs });
  const clusterProblem = await misconfiguredCluster(redisUrl);
  if (clusterProblem) throw new StartupError(clusterProblem);
  try {
    const applied = await migrate(databaseUrl);
    if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  } catch (err) {
    throw isPostgresFailure(err) ? postgresStartupError(err, databaseUrl) : err;
  }
  // Named per process, so pg_stat_activity shows which process holds which connections.
  const role = opts.api && opts.worker ? 'serve' : opts.api ? 'api' : 'worker';
  const db = openDatabase({
    url: databaseUrl,
    poolSize: config.dbPoolSize,
    timeouts: config.dbTimeouts,
    logger,
    applicationName: `baton-${role}-${process.pid}`,
  });
  const repos = createRepositories(db);
  // One registry per process: in `serve` the API's /metrics also shows this process's reconciler.
  const metrics = createBatonMetrics();
  let metricsServer: RunningMetricsServer | undefined;
  const connections: RedisClient[] = [];
  // Every Redis connection of this process reports to it: one line when Redis goes, one when it is back.
  const redisLink = new RedisLink(logger);
  let api: StartedApi | undefined;
  let worker: RunningDeliveryWorker | undefined;
  let reconciler: { stop(): Promise<void> } | undefined;
  let subscriptions: { stop(): Promise<void> } | undefined;
  let demoClient: DemoHostClient | undefined;
  const graceMs = config.shutdownGraceMs;

  const forceClose = () => {
    worker?.forceStop();
    demoClient?.close();
    for (const c of connections) c.disconnect();
    void db.close().catch((err: unknown) => logger.debug({ err }, 'closing the database at a forced stop failed'));
  };

  try {
    if (startApi) {
      if (opts.bootstrapAdmin !== false) {
        try {
          await bootstrapAdminToken({ ...repos, clock, logger }, config);
        } catch (err) {
          throw isPostgresFailure(err) ? postgresStartupError(err, databaseUrl) : err;
        }
      }
      const redis = openRedis(redisUrl, 'producer', logger, { link: redisLink });
      connections.push(redis);
      // The API's code (Fastify, its plug-ins, the pages) is loaded only by processes that serve
      // it (the launcher imports it when called), and the worker's only by workers: each process
      // holds only what it runs, which keeps it under its memory target (docs/PERFORMANCE.md, "Memory").
      try {
        api = await startApi({ config, db, redis, clock, logger, metrics });
      } catch (err) {
        throw listenStartupError(err, config.api.host, config.api.port);
      }
    }
    if (opts.worker) {
      const [
        { createAdapters },
        { DemoAgentHost },
        { DemoHostClient },
        { startDeliveryWorker },
        { startReconciler },
        { reportDeployment },
        { startSubscriptions },
      ] = await Promise.all([
        import('../../libs/adapters/create-adapters.ts'),
        import('../../libs/adapters/demo/demo-agent-host.ts'),
        import('../../libs/adapters/demo/demo-host-client.ts'),
        import('../../workers/delivery/start-delivery-worker.ts'),
        import('../../workers/timers/start-reconciler.ts'),
        import('../../workers/delivery/report-deployment.ts'),
        import('../../workers/timers/start-subscriptions.ts'),
      ]);
      const redis = openRedis(redisUrl, 'worker', logger, { link: redisLink });
      connections.push(redis);
      let demoHost = opts.demoHost;
      if (!demoHost && config.demoHostUrl) demoHost = demoClient = new DemoHostClient(config.demoHostUrl);
      demoHost ??= new DemoAgentHost();
      const adapters = createAdapters(config.workerProviders, {
        demoHost,
        deadlines: config.adapterDeadlines,
        command: config.command,
        codex: config.codex,
        claudeCode: config.claudeCode,
        turnReports: repos.turnReports,
        webhookCallbackUrl: config.webhookCallbackUrl,
      });
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
        // Live turns get the grace but its last quarter (at most 2 s), which is for handing
        // them back and closing.
        shutdownGraceMs: graceMs - Math.min(2_000, Math.floor(graceMs / 4)),
        windows: config.deliveryWindows,
        pools: config.workerPools,
      });
      // Which deployment this worker serves, and a warning when it owns no agents but others do.
      void reportDeployment(repos.agents, worker.deps.deployment, logger);
      // Workers serving the same providers and pools share one reconciler leader.
      const group = `${[...adapters.providers()].sort().join('+')}@${[...config.workerPools]
        .map((p) => p || 'default')
        .sort()
        .join('+')}`;
      reconciler = startReconciler({ ...worker.deps, locks: worker.locks }, config.reconcileIntervalMs, group, (report) =>
        metrics.reconcilerPass(report),
      );
      // Signed event subscriptions: every worker follows the event log; a lease per subscription picks its deliverer.
      subscriptions = startSubscriptions({
        repos,
        redis,
        redisPrefix: config.redisPrefix,
        clock,
        logger,
        workerId: worker.deps.workerId,
        addresses: config.subscriptionAddresses,
        counters: metrics.subscriptions,
      });
      // A worker's own metrics (reconciler actions, work gauges, process) on a port of its own, when asked for.
      if (config.metricsPort !== undefined) {
        const [{ serveMetrics }, { installWorkGauges }, { MetricsRepository }] = await Promise.all([
          import('../../libs/metrics/serve-metrics.ts'),
          import('../../libs/metrics/deployment-metrics.ts'),
          import('../../libs/db/metrics-repository.ts'),
        ]);
        // Queue depth and turns in flight of what this worker serves, so an autoscaler scrapes the worker
        // itself (an API in the same process already reports them for every provider, in the same registry).
        if (!api)
          installWorkGauges(
            metrics,
            { repo: new MetricsRepository(db.pool), queues: worker.queues, locks: worker.locks, logger },
            { providers: new Set(adapters.providers()), pools: new Set(config.workerPools) },
          );
        try {
          metricsServer = await serveMetrics(metrics, { host: config.api.host, port: config.metricsPort, logger });
        } catch (err) {
          throw metricsPortError(err, config.api.host, config.metricsPort);
        }
      }
    }
  } catch (err) {
    await reconciler?.stop();
    await subscriptions?.stop();
    await api?.close().catch((err: unknown) => logger.debug({ err }, 'closing the API after a failed start failed'));
    await metricsServer?.close();
    forceClose();
    throw err;
  }

  let stopping: Promise<void> | undefined;
  return {
    db,
    api,
    worker,
    stop() {
      stopping ??= (async () => {
        let timer: NodeJS.Timeout | undefined;
        const graceOver = new Promise<'timed out'>((resolve) => {
          timer = setTimeout(() => resolve('timed out'), graceMs);
        });
        // With Redis away, queues and consumers would only wait for a reconnect: no use waiting.
        const redisDown = redisLink.whenDown().then((): StepOutcome => 'redis down');
        const steps: Array<[string, () => Promise<unknown> | undefined]> = [
          ['api', () => api?.close()],
          ['metrics', () => metricsServer?.close()],
          ['reconciler', () => reconciler?.stop()],
          ['subscriptions', () => subscriptions?.stop()],
          ['delivery worker', () => worker?.stop()],
          ['redis', () => Promise.all(connections.map((c) => c.quit().catch(() => c.disconnect())))],
          ['postgres', () => db.close()],
        ];
        const failed: string[] = [];
        try {
          for (const [name, step] of steps) {
            const outcome: StepOutcome = await Promise.race([
              Promise.resolve(step()).then(
                (): StepOutcome => 'done',
                (err: unknown): StepOutcome => {
                  logger.error({ err, step: name }, 'shutdown step failed');
                  return 'failed';
                },
              ),
              graceOver,
              redisDown,
            ]);
            if (outcome === 'timed out') {
              logger.warn({ step: name, graceMs }, 'shutdown grace over: force-closing');
              forceClose();
              throw new Error(`shutdown did not finish within BATON_SHUTDOWN_GRACE_MS (${graceMs} ms; stuck at: ${name}); force-closed`);
            }
            if (outcome === 'redis down') {
              logger.warn({ step: name }, 'redis is unreachable: force-closing without waiting for the grace');
              forceClose();
              throw new Error(`Redis was unreachable during the shutdown (at: ${name}); force-closed`);
            }
            if (outcome === 'failed') failed.push(name);
          }
          demoClient?.close();
        } finally {
          clearTimeout(timer);
        }
        if (failed.length > 0) throw new Error(`shutdown steps failed: ${failed.join(', ')}`);
      })();
      return stopping;
    },
  };
}
