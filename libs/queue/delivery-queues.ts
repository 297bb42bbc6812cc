import { Queue } from 'bullmq';
import type { RedisClient } from './open-redis.ts';
import type { Logger } from '../logging/create-logger.ts';
import { DISPATCH_JOB_NAME, type DispatchJob } from './dispatch-job.ts';
import type { RedisNames } from './redis-names.ts';

export interface DeliveryQueueOptions {
  /** Shared by every queue of this process: producers never open a connection per agent. */
  connection: RedisClient;
  names: RedisNames;
  shards: number;
  logger: Logger;
  /**
   * Which agents' turn locks are held right now, leaving each holder a recheck note
   * (TurnLocks.noteIfHeld). A `sent` wake-up for such an agent is not added: its lock holder
   * takes the note when releasing and looks at Postgres again (after this handoff's commit,
   * since the lock was still held when we looked), and a holder that dies is replaced by the
   * reconciler's sweep.
   */
  heldLocks?: (agentIds: readonly string[]) => Promise<boolean[]>;
  /** At most one sweep job per agent in this window (default SWEEP_DEDUP_MS). */
  sweepDedupMs?: number;
}

interface WakeUp {
  name: string;
  data: DispatchJob;
  opts: { jobId: string; deduplication?: { id: string; ttl: number } };
}

/**
 * What the delivery workers keep of finished jobs (BullMQ worker options, not stored in each
 * job): nothing of a completed one (its deterministic id can be added again for a later cause),
 * failed ones for a day, at most 1,000 per queue (to read in Bull Board).
 */
export const DELIVERY_JOBS_KEPT = {
  removeOnComplete: { count: 0 },
  removeOnFail: { age: 24 * 3600, count: 1000 },
} as const;

/** How long a sweep job keeps the reconciler from adding another for the same agent. */
export const SWEEP_DEDUP_MS = 5_000;

/**
 * An immediate dispatch job. The reconciler's sweep jobs are deduplicated per agent for
 * `sweepDedupMs` (BullMQ deduplication with an expiring key): under a backlog, every sweep (once
 * a second) otherwise added one more job for each agent whose wake-up was simply still waiting,
 * each run costing a lock and two look-ups that found nothing (4-5 runs per handoff at 10,000
 * agents). The key expires by itself, so a job lost to a partial key deletion never blocks the
 * agent for longer than that. Wake-ups for a commit or a finished turn are never merged.
 */
function wakeUp(job: DispatchJob, jobId: string, sweepDedupMs: number): WakeUp {
  const deduplication = job.cause === 'sweep' ? { id: `sweep-${job.agentId}`, ttl: sweepDedupMs } : undefined;
  return { name: DISPATCH_JOB_NAME, data: job, opts: deduplication ? { jobId, deduplication } : { jobId } };
}

/**
 * The producer side of delivery: adds dispatch jobs to the provider shard an agent hashes to.
 * Jobs are small, carry deterministic ids, and are removed on completion so the same id can
 * be added again for a later cause. Losing one is harmless: the reconciler rebuilds them from
 * Postgres.
 */
export class DeliveryQueues {
  private readonly queues = new Map<string, Queue>();
  /** Jobs waiting for this tick's bulk add, per queue. */
  private readonly pending = new Map<
    string,
    { jobs: WakeUp[]; agents: Set<string>; done: Promise<void> }
  >();

  constructor(private readonly opts: DeliveryQueueOptions) {}

  queueName(provider: string, agentId: string, pool = ''): string {
    return this.opts.names.deliveryQueue(provider, this.opts.names.shardOf(agentId, this.opts.shards), pool);
  }

  private queue(name: string): Queue {
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue(name, {
        connection: this.opts.connection,
        prefix: this.opts.names.bullPrefix,
        // Retries are per job (kept in its hash); what is removed when, the workers decide for
        // the whole queue (DELIVERY_JOBS_KEPT), so each queued job's hash stays small.
        defaultJobOptions: { attempts: 5, backoff: { type: 'exponential', delay: 200 } },
      });
      q.on('error', (err) => this.opts.logger.warn({ err, queue: name }, 'delivery queue error'));
      this.queues.set(name, q);
    }
    return q;
  }

  /**
   * Adds one dispatch job (immediate ones are batched per tick). Idempotent per `jobId` while a
   * job with that id exists; sweep jobs also per agent for a few seconds (see wakeUp).
   * @throws when Redis cannot be reached (callers decide: the API logs it, the reconciler retries).
   */
  async enqueue(job: DispatchJob, jobId: string, delayMs = 0): Promise<void> {
    const name = this.queueName(job.provider, job.agentId, job.pool);
    if (delayMs > 0) {
      await this.queue(name).add(DISPATCH_JOB_NAME, job, { jobId, delay: delayMs });
      return;
    }
    // Immediate jobs added in the same tick go to Redis together (one round trip per queue),
    // and an agent needs one wake-up per tick however many handoffs it got: the worker that
    // takes its turn lock delivers everything Postgres says is next.
    let batch = this.pending.get(name);
    if (!batch) {
      const jobs: WakeUp[] = [];
      const done = new Promise<void>((resolve, reject) => {
        setImmediate(() => {
          this.pending.delete(name);
          this.flush(name, jobs).then(resolve, reject);
        });
      });
      batch = { jobs, agents: new Set(), done };
      this.pending.set(name, batch);
    }
    if (!batch.agents.has(job.agentId)) {
      batch.agents.add(job.agentId);
      batch.jobs.push(wakeUp(job, jobId, this.opts.sweepDedupMs ?? SWEEP_DEDUP_MS));
    }
    await batch.done;
  }

  private async flush(name: string, jobs: WakeUp[]): Promise<void> {
    let toAdd = jobs;
    const sent = jobs.filter((j) => j.data.cause === 'sent');
    if (this.opts.heldLocks && sent.length > 0) {
      const held = await this.opts.heldLocks(sent.map((j) => j.data.agentId)).catch(() => sent.map(() => false));
      const skip = new Set(sent.filter((_, i) => held[i]).map((j) => j.opts.jobId));
      toAdd = jobs.filter((j) => !skip.has(j.opts.jobId));
    }
    if (toAdd.length > 0) await this.queue(name).addBulk(toAdd);
  }

  /** Adds many jobs, one round trip per queue. */
  async enqueueMany(items: ReadonlyArray<{ job: DispatchJob; jobId: string }>): Promise<void> {
    const byQueue = new Map<string, WakeUp[]>();
    for (const { job, jobId } of items) {
      const name = this.queueName(job.provider, job.agentId, job.pool);
      const list = byQueue.get(name) ?? [];
      list.push(wakeUp(job, jobId, this.opts.sweepDedupMs ?? SWEEP_DEDUP_MS));
      byQueue.set(name, list);
    }
    await Promise.all([...byQueue].map(([name, jobs]) => this.queue(name).addBulk(jobs)));
  }

  /**
   * Per route, whether its queue has jobs waiting to be taken and kept its keys since this
   * was last asked (DispatchScheduler.backlogged). One count per distinct queue, plus a mark in
   * the queue's slot (RedisNames.queueMark): when the mark was missing, the queue's keys may
   * have been lost with wake-ups in them, so the answer is false for that queue this time.
   */
  async backlogged(routes: ReadonlyArray<Pick<DispatchJob, 'agentId' | 'provider' | 'pool'>>): Promise<boolean[]> {
    const names = routes.map((r) => this.queueName(r.provider, r.agentId, r.pool));
    const answers = new Map<string, boolean>();
    await Promise.all(
      [...new Set(names)].map(async (name) => {
        const [counts, fresh] = await Promise.all([
          this.queue(name).getJobCounts('wait', 'prioritized'),
          this.opts.connection.set(this.opts.names.queueMark(name), '1', 'NX'),
        ]);
        answers.set(name, fresh !== 'OK' && (counts['wait'] ?? 0) + (counts['prioritized'] ?? 0) > 0);
      }),
    );
    return names.map((name) => answers.get(name) ?? false);
  }

  /** Every queue name a worker for `provider` in `pool` must consume. */
  allQueueNames(provider: string, pool = ''): string[] {
    return Array.from({ length: this.opts.shards }, (_, shard) => this.opts.names.deliveryQueue(provider, shard, pool));
  }

  /**
   * Jobs in the delivery queues of `provider` in `pool`, summed over the shards, by BullMQ
   * state (for /metrics: what waits in Redis, not what Postgres says is open).
   */
  async jobCounts(provider: string, pool = ''): Promise<{ waiting: number; delayed: number; active: number }> {
    const all = await Promise.all(this.allQueueNames(provider, pool).map((name) => this.queue(name).getJobCounts('wait', 'prioritized', 'delayed', 'active')));
    const sum = (key: string) => all.reduce((n, c) => n + (c[key] ?? 0), 0);
    return { waiting: sum('wait') + sum('prioritized'), delayed: sum('delayed'), active: sum('active') };
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.pending.values()].map((b) => b.done));
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
  }
}
