import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import type { RedisClient } from './open-redis.ts';
import { logQueueError } from './redis-link.ts';
import type { Logger } from '../logging/create-logger.ts';
import { DISPATCH_JOB_NAME, queueRoute, WAKE_JOB_NAME, type DispatchJob, type WakeJob } from './dispatch-job.ts';
import { JOB_IDS, type RedisNames } from './redis-names.ts';

const script = (name: string) => readFileSync(new URL(`./scripts/${name}.lua`, import.meta.url), 'utf8');

type WakeUpCommands = {
  batonAddWakeUps(set: string, scheduled: string, scheduledMs: number, ...agentIds: string[]): Promise<number>;
  batonTakeWakeUps(set: string, scheduled: string, count: number, scheduledMs: number, clearIfEmpty: '0' | '1'): Promise<string[]>;
};

/**
 * How long a queue stays scheduled (a wake job queued or draining) without its drainer taking
 * agents. A drainer whose slots are all busy stops taking; after this long the next wake-up adds
 * a job another worker can take. A drainer that died is replaced by BullMQ's stalled-job check.
 */
export const WAKE_SCHEDULED_MS = 2_000;

export interface DeliveryQueueOptions {
  /** Shared by every queue of this process: producers never open a connection per agent. */
  connection: RedisClient;
  names: RedisNames;
  shards: number;
  logger: Logger;
  /**
   * Which agents' turn locks are held right now, leaving each holder a pending wake-up
   * (TurnLocks.wakeHolderIfHeld). A `sent_behind_turn` wake-up (a handoff enrolled BUSY, behind a
   * turn in flight) for such an agent is not added: its lock holder takes the pending wake-up when
   * releasing and looks at Postgres again (after this handoff's commit, since the lock was
   * still held when we looked), and a holder that dies is replaced by the reconciler's sweep.
   * Other wake-ups are added without asking: a recipient with no turn in flight is most likely
   * free, and asking would cost two Redis commands per handoff (docs/performance-history.md,
   * "Redis at 10,000 agents: 16 -> 11 commands per handoff"); if a run
   * does hold its lock, the woken run finds it held and leaves the same pending wake-up.
   */
  heldLocks?: (agentIds: readonly string[]) => Promise<boolean[]>;
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

/**
 * The delivery queues of one deployment. Two kinds of job go on them (libs/queue/README.md,
 * "Wake-ups"):
 * - an immediate wake-up (a commit, a finished turn, the sweep) adds the agent to its queue's
 *   wake-up set; the first one that finds the queue not scheduled also adds one wake job, and the
 *   worker that takes it drains the set, many agents per job;
 * - a wake-up for later (a resend delay, a back-off) is a delayed job for that agent, with a
 *   deterministic id.
 * Losing either is harmless: the reconciler rebuilds them from Postgres.
 */
export class DeliveryQueues {
  private readonly queues = new Map<string, Queue>();
  private readonly redis: RedisClient & WakeUpCommands;
  /** Agents woken in this tick, per queue: one script call per queue and tick. */
  private readonly pending = new Map<string, { route: WakeJob; behindTurn: Set<string>; other: Set<string>; done: Promise<void> }>();

  constructor(private readonly opts: DeliveryQueueOptions) {
    const r = opts.connection as RedisClient & Partial<WakeUpCommands>;
    if (typeof r.batonAddWakeUps !== 'function') {
      opts.connection.defineCommand('batonAddWakeUps', { numberOfKeys: 2, lua: script('add-wake-ups') });
      opts.connection.defineCommand('batonTakeWakeUps', { numberOfKeys: 2, lua: script('take-wake-ups') });
    }
    this.redis = opts.connection as RedisClient & WakeUpCommands;
  }

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
      // A lost connection is the process's RedisLink's to report, once.
      q.on('error', (err) => logQueueError(this.opts.logger, err, { queue: name }, 'delivery queue error'));
      this.queues.set(name, q);
    }
    return q;
  }

  /**
   * Wakes the agent's queue: now (its wake-up set, batched per tick and queue; an agent already
   * waiting keeps its place), or after `delayMs` (a delayed job with id `jobId`, idempotent
   * while a job with that id exists).
   * @throws when Redis cannot be reached (callers decide: the API logs it, the reconciler retries).
   */
  async enqueue(job: DispatchJob, jobId: string, delayMs = 0): Promise<void> {
    const name = this.queueName(job.provider, job.agentId, job.pool);
    if (delayMs > 0) {
      await this.queue(name).add(DISPATCH_JOB_NAME, job, { jobId, delay: delayMs });
      return;
    }
    let batch = this.pending.get(name);
    if (!batch) {
      const behindTurn = new Set<string>();
      const other = new Set<string>();
      const done = new Promise<void>((resolve, reject) => {
        setImmediate(() => {
          this.pending.delete(name);
          this.flush(name, queueRoute(job.provider, job.pool), behindTurn, other).then(resolve, reject);
        });
      });
      batch = { route: queueRoute(job.provider, job.pool), behindTurn, other, done };
      this.pending.set(name, batch);
    }
    (job.cause === 'sent_behind_turn' ? batch.behindTurn : batch.other).add(job.agentId);
    await batch.done;
  }

  private async flush(name: string, route: WakeJob, behindTurn: Set<string>, other: Set<string>): Promise<void> {
    const agents = new Set(other);
    const fresh = [...behindTurn].filter((a) => !other.has(a));
    if (this.opts.heldLocks && fresh.length > 0) {
      const held = await this.opts.heldLocks(fresh).catch(() => fresh.map(() => false));
      fresh.forEach((a, i) => {
        if (!held[i]) agents.add(a);
      });
    } else {
      for (const a of fresh) agents.add(a);
    }
    if (agents.size > 0) await this.wake(name, route, [...agents]);
  }

  /** Adds the agents to the queue's wake-up set, and a wake job when that marked the queue scheduled. */
  private async wake(name: string, route: WakeJob, agentIds: string[]): Promise<void> {
    const scheduled = await this.redis.batonAddWakeUps(
      this.opts.names.wakeUps(name),
      this.opts.names.wakeScheduled(name),
      WAKE_SCHEDULED_MS,
      ...agentIds,
    );
    if (scheduled === 1) await this.addWakeJob(name, route);
  }

  /**
   * Adds a wake job for the queue (its scheduled flag is set): a drainer that stops before the set is empty
   * hands the rest on with this, and add-wake-ups adds one when it marked the queue scheduled.
   */
  async addWakeJob(name: string, route: WakeJob): Promise<void> {
    await this.queue(name).add(WAKE_JOB_NAME, route, { jobId: JOB_IDS.wake(randomUUID()) });
  }

  /**
   * Takes up to `count` agents from the queue's wake-up set, oldest first (take-wake-ups.lua),
   * renewing the queue's scheduled flag. An empty answer means the set was empty; the flag is then cleared
   * unless `lingering` (the drainer looks again soon, and producers need add no job meanwhile).
   */
  async takeWakeUps(name: string, count: number, lingering = false): Promise<string[]> {
    return this.redis.batonTakeWakeUps(
      this.opts.names.wakeUps(name),
      this.opts.names.wakeScheduled(name),
      count,
      WAKE_SCHEDULED_MS,
      lingering ? '0' : '1',
    );
  }

  /** The agents in the queue's wake-up set, oldest first (for tests and operators). */
  async waitingWakeUps(name: string): Promise<string[]> {
    return this.opts.connection.zrange(this.opts.names.wakeUps(name), '0', '-1');
  }

  /** Wakes many agents now, one script call per queue. */
  async enqueueMany(items: ReadonlyArray<{ job: DispatchJob; jobId: string }>): Promise<void> {
    const byQueue = new Map<string, { route: WakeJob; agents: Set<string> }>();
    for (const { job } of items) {
      const name = this.queueName(job.provider, job.agentId, job.pool);
      const entry = byQueue.get(name) ?? { route: queueRoute(job.provider, job.pool), agents: new Set<string>() };
      entry.agents.add(job.agentId);
      byQueue.set(name, entry);
    }
    await Promise.all([...byQueue].map(([name, { route, agents }]) => this.wake(name, route, [...agents])));
  }

  /**
   * Per route, whether its queue has wake-ups waiting to be taken and kept its keys since this
   * was last asked (DispatchScheduler.backlogged): jobs waiting, or agents in its wake-up set
   * while the queue is scheduled (a wake job is queued or draining it; a set whose flag is gone lost
   * its job, say to a producer that died between setting the flag and adding the job, and is not a backlog the
   * sweep may wait for). One count per distinct queue, plus a sentinel key in the queue's slot
   * (RedisNames.queueSentinel): when the sentinel was missing, the queue's keys may have been lost with
   * wake-ups in them, so the answer is false for that queue this time.
   */
  async backlogged(routes: ReadonlyArray<Pick<DispatchJob, 'agentId' | 'provider' | 'pool'>>): Promise<boolean[]> {
    const names = routes.map((r) => this.queueName(r.provider, r.agentId, r.pool));
    const answers = new Map<string, boolean>();
    await Promise.all(
      [...new Set(names)].map(async (name) => {
        const [counts, woken, scheduled, fresh] = await Promise.all([
          this.queue(name).getJobCounts('wait', 'prioritized'),
          this.opts.connection.zcard(this.opts.names.wakeUps(name)),
          this.opts.connection.exists(this.opts.names.wakeScheduled(name)),
          this.opts.connection.set(this.opts.names.queueSentinel(name), '1', 'NX'),
        ]);
        answers.set(name, fresh !== 'OK' && (counts['wait'] ?? 0) + (counts['prioritized'] ?? 0) + (scheduled === 1 ? woken : 0) > 0);
      }),
    );
    return names.map((name) => answers.get(name) ?? false);
  }

  /** Every queue name a worker for `provider` in `pool` must consume. */
  allQueueNames(provider: string, pool = ''): string[] {
    return Array.from({ length: this.opts.shards }, (_, shard) => this.opts.names.deliveryQueue(provider, shard, pool));
  }

  /**
   * What waits in the delivery queues of `provider` in `pool`, summed over the shards (for
   * /metrics: what waits in Redis, not what Postgres says is open): `waiting` counts the agents
   * in the wake-up sets and the jobs waiting to be taken, `delayed` and `active` are jobs.
   */
  async jobCounts(provider: string, pool = ''): Promise<{ waiting: number; delayed: number; active: number }> {
    const names = this.allQueueNames(provider, pool);
    const [all, woken] = await Promise.all([
      Promise.all(names.map((name) => this.queue(name).getJobCounts('wait', 'prioritized', 'delayed', 'active'))),
      Promise.all(names.map((name) => this.opts.connection.zcard(this.opts.names.wakeUps(name)))),
    ]);
    const sum = (key: string) => all.reduce((n, c) => n + (c[key] ?? 0), 0);
    return { waiting: sum('wait') + sum('prioritized') + woken.reduce((n, w) => n + w, 0), delayed: sum('delayed'), active: sum('active') };
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.pending.values()].map((b) => b.done));
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
  }
}
