import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import type { Clock } from '../../libs/domain/clock.ts';
import type { Repositories } from '../../libs/db/repositories.ts';
import { dispatchAgent, type DispatchDeps } from '../../libs/handoffs/dispatch-agent.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import { TurnLocks } from '../../libs/locks/turn-locks.ts';
import { createProviderStatusCheck, type ProviderStatusCheck } from '../../libs/adapters/provider-status.ts';
import { RuntimeSettingsReader } from '../../libs/handoffs/runtime-settings-reader.ts';
import { DeliveryQueues } from '../../libs/queue/delivery-queues.ts';
import { parseDispatchJob } from '../../libs/queue/dispatch-job.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';

export interface DeliveryWorkerOptions {
  readonly repos: Repositories;
  /** The one command connection this process shares; each queue consumer adds one blocking connection. */
  readonly redis: Redis;
  readonly adapters: AdapterRegistry;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly workerId: string;
  readonly redisPrefix: string;
  readonly queueShards: number;
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
}

export interface RunningDeliveryWorker {
  readonly queues: DeliveryQueues;
  readonly locks: TurnLocks;
  /** The dependencies the delivery use cases run with (the reconciler shares them). */
  readonly deps: DispatchDeps & { locks: TurnLocks };
  /** Graceful stop: take no new turns, let live turns finish for the grace period, hand back the rest. */
  stop(): Promise<void>;
}

/**
 * Consumes the delivery queues of every provider in `adapters`: one BullMQ Worker per shard,
 * so the connections this process holds are (shards x providers) + 1, whatever the number of
 * agents. Each job runs dispatchAgent (libs/handoffs) under the agent's turn lock.
 */
export function startDeliveryWorker(opts: DeliveryWorkerOptions): RunningDeliveryWorker {
  const names = new RedisNames(opts.redisPrefix);
  const queues = new DeliveryQueues({ connection: opts.redis, names, shards: opts.queueShards, logger: opts.logger });
  const locks = new TurnLocks(opts.redis, names, { ttlMs: opts.turnLockTtlMs, logger: opts.logger });
  const settings = new RuntimeSettingsReader(opts.repos.settings, opts.settingsMaxAgeMs ?? 1_000);
  const draining = new AbortController();
  const handBack = new AbortController();
  const deps: DispatchDeps & { locks: TurnLocks } = {
    ...opts.repos,
    scheduler: queues,
    clock: opts.clock,
    logger: opts.logger,
    locks,
    adapters: opts.adapters,
    settingsReader: settings,
    outage: opts.outage ?? createProviderStatusCheck(),
    workerId: opts.workerId,
    timing: {
      busyRetryMs: opts.busyRetryMs ?? 1_000,
      unreachableRetryMs: opts.unreachableRetryMs ?? 2_000,
      outageRetryMs: opts.outageRetryMs ?? 5_000,
      recheckMs: opts.recheckMs ?? 2_000,
    },
  };
  const signals = { draining: draining.signal, handBack: handBack.signal };

  const workers: Worker[] = [];
  for (const provider of opts.adapters.providers()) {
    for (const queueName of queues.allQueueNames(provider)) {
      const worker = new Worker(
        queueName,
        async (job) => {
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
        },
      );
      worker.on('failed', (job, err) => opts.logger.warn({ err, jobId: job?.id, queue: queueName }, 'dispatch job failed'));
      worker.on('error', (err) => opts.logger.warn({ err, queue: queueName }, 'delivery worker error'));
      workers.push(worker);
    }
  }
  opts.logger.info({ workerId: opts.workerId, providers: opts.adapters.providers(), queues: workers.length }, 'delivery worker started');

  let stopping: Promise<void> | undefined;
  return {
    queues,
    locks,
    deps,
    stop() {
      stopping ??= (async () => {
        draining.abort(new Error('shutting down'));
        const grace = setTimeout(() => handBack.abort(new Error('shutdown grace period over')), opts.shutdownGraceMs);
        grace.unref();
        // close() waits for active jobs: they finish their turn or hand it back.
        await Promise.all(workers.map((w) => w.close()));
        clearTimeout(grace);
        await queues.close();
        opts.logger.info({ workerId: opts.workerId }, 'delivery worker stopped');
      })();
      return stopping;
    },
  };
}
