import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../logging/create-logger.ts';
import { DISPATCH_JOB_NAME, type DispatchJob } from './dispatch-job.ts';
import type { RedisNames } from './redis-names.ts';

export interface DeliveryQueueOptions {
  /** Shared by every queue of this process: producers never open a connection per agent. */
  connection: Redis;
  names: RedisNames;
  shards: number;
  logger: Logger;
}

/**
 * The producer side of delivery: adds dispatch jobs to the provider shard an agent hashes to.
 * Jobs are small, carry deterministic ids, and are removed on completion so the same id can
 * be added again for a later cause. Losing one is harmless: the reconciler rebuilds them from
 * Postgres.
 */
export class DeliveryQueues {
  private readonly queues = new Map<string, Queue>();

  constructor(private readonly opts: DeliveryQueueOptions) {}

  queueName(provider: string, agentId: string): string {
    return this.opts.names.deliveryQueue(provider, this.opts.names.shardOf(agentId, this.opts.shards));
  }

  private queue(name: string): Queue {
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue(name, {
        connection: this.opts.connection,
        prefix: this.opts.names.bullPrefix,
        defaultJobOptions: {
          removeOnComplete: true,
          removeOnFail: { age: 24 * 3600, count: 1000 },
          attempts: 5,
          backoff: { type: 'exponential', delay: 200 },
        },
      });
      q.on('error', (err) => this.opts.logger.warn({ err, queue: name }, 'delivery queue error'));
      this.queues.set(name, q);
    }
    return q;
  }

  /**
   * Adds one dispatch job. Idempotent per `jobId` while a job with that id exists.
   * @throws when Redis cannot be reached (callers decide: the API logs it, the reconciler retries).
   */
  async enqueue(job: DispatchJob, jobId: string, delayMs = 0): Promise<void> {
    const name = this.queueName(job.provider, job.agentId);
    await this.queue(name).add(DISPATCH_JOB_NAME, job, { jobId, ...(delayMs > 0 ? { delay: delayMs } : {}) });
  }

  /** Adds many jobs, one round trip per queue. */
  async enqueueMany(items: ReadonlyArray<{ job: DispatchJob; jobId: string }>): Promise<void> {
    const byQueue = new Map<string, Array<{ name: string; data: DispatchJob; opts: { jobId: string } }>>();
    for (const { job, jobId } of items) {
      const name = this.queueName(job.provider, job.agentId);
      const list = byQueue.get(name) ?? [];
      list.push({ name: DISPATCH_JOB_NAME, data: job, opts: { jobId } });
      byQueue.set(name, list);
    }
    await Promise.all([...byQueue].map(([name, jobs]) => this.queue(name).addBulk(jobs)));
  }

  /** Every queue name a worker for `provider` must consume. */
  allQueueNames(provider: string): string[] {
    return Array.from({ length: this.opts.shards }, (_, shard) => this.opts.names.deliveryQueue(provider, shard));
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
  }
}
