import { Worker } from 'bullmq';
import { EventStreamPublisher } from '../../libs/queue/event-stream.ts';
import { duplicateRedis, type RedisClient } from '../../libs/queue/open-redis.ts';
import { isRedisConnectionError, logQueueError } from '../../libs/queue/redis-link.ts';
import { isDatabaseUnavailable } from '../../libs/db/classify-error.ts';
import type { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import type { Clock } from '../../libs/domain/clock.ts';
import type { Repositories } from '../../libs/db/repositories.ts';
import { dispatchAgent } from '../../libs/handoffs/dispatch-agent.ts';
import type { DispatchDeps, WorkerHooks } from '../../libs/handoffs/dispatch-deps.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import { TurnLocks } from '../../libs/locks/turn-locks.ts';
import { createProviderStatusCheck, type ProviderStatusCheck } from '../../libs/adapters/provider-status.ts';
import { RuntimeSettingsReader } from '../../libs/handoffs/runtime-settings-reader.ts';
import { BudgetGate } from '../../libs/handoffs/budget-gate.ts';
import { UnwrittenReservations } from '../../libs/handoffs/unwritten-reservations.ts';
import { DEFAULT_DELIVERY_WINDOWS, type DeliveryWindows } from '../../libs/domain/delivery-policy.ts';
import { DELIVERY_JOBS_KEPT, DeliveryQueues } from '../../libs/queue/delivery-queues.ts';
import { parseDispatchJob, parseWakeJob, queueRoute, WAKE_JOB_NAME } from '../../libs/queue/dispatch-job.ts';
import { JOB_IDS, RedisNames } from '../../libs/queue/redis-names.ts';
import { drainWakeUps, QueueSlots } from './drain-wake-ups.ts';
import { prepareAgents, type PreparedAgent } from './prepare-agents.ts';
import { poolName } from '../../libs/domain/ids.ts';
import { DELIVERY_WORKER_DEFAULTS, TURN_LOCK_DEFAULTS } from '../../libs/config/component-defaults.ts';

export interface DeliveryWorkerOptions {
  readonly repos: Repositories;
  /** The one command connection this process shares; each queue consumer adds one blocking connection. */
  readonly redis: RedisClient;
  readonly adapters: AdapterRegistry;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly workerId: string;
  readonly redisPrefix: string;
  readonly queueShards: number;
  /**
   * Worker pools (host affinity) this process delivers to ('' = the unnamed pool; default ['']).
   * An agent of another pool never gets a turn from this process.
   */
  readonly pools?: readonly string[];
  readonly concurrency: number;
  readonly turnLockTtlMs: number;
  readonly jobLockMs: number;
  readonly stalledIntervalMs: number;
  readonly shutdownGraceMs: number;
  readonly busyRetryMs?: number;
  readonly unreachableRetryMs?: number;
  readonly outageRetryMs?: number;
  readonly recheckMs?: number;
  /** How stale the runtime settings this worker acts on may be (default 1 s). */
  readonly settingsMaxAgeMs?: number;
  /** The outage guard's status check; one per process so its cache is shared. */
  readonly outage?: ProviderStatusCheck;
  /** Fault-injection points for tests; none in production. */
  readonly hooks?: WorkerHooks;
  /** The reconciliation windows (config: BATON_UNOBSERVABLE_AFTER_MS and friends); defaults otherwise. */
  readonly windows?: DeliveryWindows;
}

export interface RunningDeliveryWorker {
  readonly queues: DeliveryQueues;
  readonly locks: TurnLocks;
  /** The dependencies the delivery use cases run with (the reconciler shares them). */
  readonly deps: DispatchDeps & { locks: TurnLocks };
  /**
   * The runtimes of this worker's agents being readied ahead of their first turns
   * (prepare-agents.ts): resolves with what was done for each once all are, never rejects.
   */
  readonly prepared: Promise<PreparedAgent[]>;
  /** Graceful stop: take no new turns, let live turns finish for the grace period, hand back the rest. */
  stop(): Promise<void>;
  /**
   * When a graceful stop cannot finish (Redis down: BullMQ waits for a reconnect): hand back
   * at once and close the consumers without waiting for their jobs or for Redis. Fire and forget.
   */
  forceStop(): void;
}

/**
 * Consumes the delivery queues of every provider in `adapters`: one BullMQ Worker per shard,
 * so the connections this process holds are (shards x providers) + 1, whatever the number of
 * agents. Each job runs dispatchAgent (libs/handoffs) under the agent's turn lock.
 */
export function startDeliveryWorker(opts: DeliveryWorkerOptions): RunningDeliveryWorker {
  const names = new RedisNames(opts.redisPrefix);
  const queues = new DeliveryQueues({ connection: opts.redis, names, shards: opts.queueShards, logger: opts.logger });
  // The turn locks get a connection of their own whose commands give up within a third of the
  // lock's lifetime: on the shared one (BullMQ's, which waits forever) a holder cut off from
  // Redis would never learn that its lock expired while another worker took it over.
  const lockCommandTimeoutMs = Math.max(TURN_LOCK_DEFAULTS.minRoundMs, Math.floor(opts.turnLockTtlMs / 3));
  // Auto-pipelined: the lock rounds of the many runs a worker has going (acquire, proof,
  // extension, release) issued in the same turn of the event loop share one socket write.
  const lockRedis = duplicateRedis(
    opts.redis,
    { connectionName: 'baton-locks', maxRetriesPerRequest: 1, commandTimeout: lockCommandTimeoutMs },
    { autoPipelining: true },
  );
  lockRedis.on('error', (err) => opts.logger.debug({ err }, 'turn lock connection error'));
  const locks = new TurnLocks(lockRedis, names, { ttlMs: opts.turnLockTtlMs, logger: opts.logger, commandTimeoutMs: lockCommandTimeoutMs });
  const settings = new RuntimeSettingsReader(opts.repos.settings, opts.settingsMaxAgeMs ?? DELIVERY_WORKER_DEFAULTS.settingsMaxAgeMs);
  const draining = new AbortController();
  const stopFollowing = new AbortController();
  const deps: DispatchDeps & { locks: TurnLocks } = {
    ...opts.repos,
    // The worker acts only on agents of its own deployment: those whose turn locks are ours.
    deployment: names.deployment,
    scheduler: queues,
    events: new EventStreamPublisher(opts.redis, names, opts.logger),
    clock: opts.clock,
    logger: opts.logger,
    locks,
    adapters: opts.adapters,
    settingsReader: settings,
    budgetGate: new BudgetGate({ budgets: opts.repos.budgets, clock: opts.clock }),
    outage: opts.outage ?? createProviderStatusCheck(),
    workerId: opts.workerId,
    scope: { providers: opts.adapters.providers(), pools: opts.pools ?? [''] },
    ...(opts.hooks ? { hooks: opts.hooks } : {}),
    windows: opts.windows ?? DEFAULT_DELIVERY_WINDOWS,
    unwritten: new UnwrittenReservations(),
    timing: {
      busyRetryMs: opts.busyRetryMs ?? DELIVERY_WORKER_DEFAULTS.busyRetryMs,
      unreachableRetryMs: opts.unreachableRetryMs ?? DELIVERY_WORKER_DEFAULTS.unreachableRetryMs,
      outageRetryMs: opts.outageRetryMs ?? DELIVERY_WORKER_DEFAULTS.outageRetryMs,
      recheckMs: opts.recheckMs ?? DELIVERY_WORKER_DEFAULTS.recheckMs,
    },
  };
  const signals = { draining: draining.signal, stopFollowing: stopFollowing.signal };

  const workers: Worker[] = [];
  const pools = opts.pools ?? [''];
  const routes = opts.adapters
    .providers()
    .flatMap((provider) => pools.flatMap((pool) => queues.allQueueNames(provider, pool).map((name) => ({ name, provider, pool }))));
  for (const { name: queueName, provider, pool } of routes) {
    const route = queueRoute(provider, pool);
    // The dispatch runs of this queue in flight in this process, whichever wake job started them.
    // Runs that only follow a turn in its session hold a slot but do not count as at work.
    const slots = new QueueSlots(
      opts.concurrency,
      {
        pause: () =>
          void worker.pause(true).catch((err: unknown) => opts.logger.warn({ err, queue: queueName }, 'pausing a delivery queue failed')),
        resume: () => void worker.resume(),
      },
      Math.min(opts.concurrency, DELIVERY_WORKER_DEFAULTS.workingRunsPerQueue),
    );
    const run = { follow: <T>(wait: () => Promise<T>) => slots.follow(wait) };
    const worker: Worker = new Worker(
      queueName,
      async (job) => {
        if (job.name === WAKE_JOB_NAME) {
          parseWakeJob(job.data);
          const started = await drainWakeUps({
            queue: queueName,
            slots,
            take: (count, lingering) => queues.takeWakeUps(queueName, count, lingering),
            addWakeJob: () => queues.addWakeJob(queueName, route),
            dispatch: (agentId) => dispatchAgent(deps, { ...route, agentId, cause: 'wake' }, signals, run),
            retryLater: (agentId) =>
              queues.enqueue(
                { ...route, agentId, cause: 'due' },
                JOB_IDS.dueAt(agentId, Date.now() + DELIVERY_WORKER_DEFAULTS.failedRunRetryMs, job.id ?? ''),
                DELIVERY_WORKER_DEFAULTS.failedRunRetryMs,
              ),
            draining: draining.signal,
            logger: opts.logger,
          });
          return { started };
        }
        const data = parseDispatchJob(job.data);
        const summary = await dispatchAgent(deps, data, signals);
        return summary;
      },
      {
        connection: opts.redis,
        prefix: names.bullPrefix,
        concurrency: opts.concurrency,
        // A killed worker's job is noticed within ~jobLockMs + stalledIntervalMs (seconds,
        // not BullMQ's default 30 s + 30 s): see libs/queue/README.md.
        lockDuration: opts.jobLockMs,
        stalledInterval: opts.stalledIntervalMs,
        maxStalledCount: 10,
        drainDelay: 5,
        autorun: true,
        ...DELIVERY_JOBS_KEPT,
      },
    );
    worker.on('failed', (job, err) => {
      // A job that failed for an outage is tried again; the outage itself is logged once (RedisLink, DatabaseLink).
      const fields = { err, jobId: job?.id, queue: queueName };
      if (isDatabaseUnavailable(err) || isRedisConnectionError(err)) opts.logger.debug(fields, 'dispatch job failed');
      else opts.logger.warn(fields, 'dispatch job failed');
    });
    // Its own connections' failures while Redis is away: the process's RedisLink says so once.
    worker.on('error', (err) => logQueueError(opts.logger, err, { queue: queueName }, 'delivery worker error'));
    workers.push(worker);
  }
  opts.logger.info(
    { workerId: opts.workerId, providers: opts.adapters.providers(), pools: pools.map(poolName), queues: workers.length },
    'delivery worker started',
  );
  // Alongside delivery, not before it: a turn that comes first starts its runtime itself.
  const prepared = prepareAgents(
    { agents: opts.repos.agents, adapters: opts.adapters, deployment: names.deployment, pools, logger: opts.logger },
    draining.signal,
  ).catch((err: unknown) => {
    opts.logger.warn({ err }, 'preparing the agents failed');
    return [];
  });

  let stopping: Promise<void> | undefined;
  return {
    queues,
    locks,
    deps,
    prepared,
    stop() {
      stopping ??= (async () => {
        draining.abort(new Error('shutting down'));
        const grace = setTimeout(() => stopFollowing.abort(new Error('shutdown grace period over')), opts.shutdownGraceMs);
        grace.unref();
        // close() waits for active jobs: they finish their turn or hand it back.
        await Promise.all(workers.map((w) => w.close()));
        clearTimeout(grace);
        await queues.close();
        await lockRedis.quit().catch(() => lockRedis.disconnect());
        opts.logger.info({ workerId: opts.workerId }, 'delivery worker stopped');
      })();
      return stopping;
    },
    forceStop() {
      draining.abort(new Error('shutting down'));
      stopFollowing.abort(new Error('shutdown forced'));
      const closeFailed = (err: unknown) => opts.logger.debug({ err }, 'closing at a forced stop failed');
      for (const w of workers) void w.close(true).catch(closeFailed);
      void queues.close().catch(closeFailed);
      lockRedis.disconnect();
    },
  };
}
