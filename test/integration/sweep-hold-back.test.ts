import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerAgent } from '../../libs/handoffs/manage-agents.ts';
import { sendHandoff } from '../../libs/handoffs/send-handoff.ts';
import { SWEEP_HOLD_BACK_MS, SweepMemory, sweepOpenWork } from '../../libs/handoffs/sweep-open-work.ts';
import { WAKE_JOB_NAME } from '../../libs/queue/dispatch-job.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import type { RunningDeliveryWorker } from '../../workers/delivery/start-delivery-worker.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * The reconciler's sweep during a backlog: an agent with only waiting work whose queue has
 * wake-ups waiting is held back (its own wake-up is most likely among them), for at most
 * SWEEP_HOLD_BACK_MS; a turn that may be live, an empty queue, or a queue whose keys were lost
 * gets the agent queued at once. One queue shard, and a worker that serves another pool, so
 * every wake-up stays where the test can see it.
 */
let baton: TestBaton;
let worker: RunningDeliveryWorker;
let names: RedisNames;
let queue: Queue;
let n = 0;

beforeAll(async () => {
  baton = await startTestBaton({ queueShards: 1 });
  names = new RedisNames(baton.prefix);
  worker = baton.startWorker({ pools: ['elsewhere'] });
  queue = new Queue(worker.queues.queueName('demo', 'x'), { connection: baton.redis, prefix: names.bullPrefix });
  await registerAgent(baton.core, { project: 'default', handle: 'sender', provider: 'demo' });
});

afterAll(async () => {
  await queue?.close();
  await baton?.stop();
});

/** An agent with one WAITING handoff whose wake-up was lost. */
async function agentWithLostWakeUp(): Promise<{ agentId: string; handoffId: string }> {
  const handle = `s${++n}`;
  const agent = await registerAgent(baton.core, { project: 'default', handle, provider: 'demo' });
  const { handoff } = await sendHandoff(baton.core, { project: 'default', from: 'sender', to: handle, message: 'lost wake-up' });
  // The send answers before its wake-up is added: wait for it, then lose it.
  await eventually(async () => (await woken()).includes(agent.id), { what: 'the wake-up' });
  await baton.redis.zrem(names.wakeUps(queue.name), agent.id);
  for (const job of await queue.getJobs(['wait'])) if (job.name === WAKE_JOB_NAME) await job.remove();
  await baton.redis.del(names.wakeScheduled(queue.name));
  return { agentId: agent.id, handoffId: handoff.id };
}

/** The agents in the queue's wake-up set. */
async function woken(): Promise<string[]> {
  return worker.queues.waitingWakeUps(queue.name);
}

/** Some other agent's wake-up waiting in the same queue: the backlog (in the wake-up set, or a job). */
async function backlog(kind: 'wake-up' | 'job' = 'wake-up'): Promise<void> {
  const agentId = `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`;
  if (kind === 'job') await queue.add('dispatch', { agentId, provider: 'demo', cause: 'due' }, { jobId: `backlog-${n}` });
  else {
    await baton.redis.zadd(names.wakeUps(queue.name), Date.now(), agentId);
    // Scheduled: a wake job is queued for the set, or draining it.
    await baton.redis.set(names.wakeScheduled(queue.name), '1', 'PX', 60_000);
  }
}

/** Whether the sweep queued the agent (its wake-up is in the set). */
async function wakeUpsFor(agentId: string): Promise<number> {
  return (await woken()).includes(agentId) ? 1 : 0;
}

/** No open work left from earlier tests, an empty queue, and the queue's mark set (as by an earlier sweep). */
async function fresh(): Promise<void> {
  await baton.db.pool.query(`UPDATE handoffs SET delivery_state = 'CANCELLED', settled_at = now() WHERE settled_at IS NULL`);
  await queue.obliterate({ force: true });
  await baton.redis.del(names.wakeUps(queue.name), names.wakeScheduled(queue.name));
  await worker.queues.backlogged([{ agentId: 'x', provider: 'demo' }]);
}

const at = (offsetMs: number) => ({ ...worker.deps, clock: { now: () => new Date(Date.now() + offsetMs) } });

describe('the sweep during a backlog', () => {
  it('holds back an agent whose queue has wake-ups waiting, then queues it once it waited SWEEP_HOLD_BACK_MS', async () => {
    await fresh();
    const memory = new SweepMemory();
    const { agentId } = await agentWithLostWakeUp();
    await backlog();
    await sweepOpenWork(worker.deps, 1_000, memory);
    expect(await wakeUpsFor(agentId)).toBe(0);
    await sweepOpenWork(at(SWEEP_HOLD_BACK_MS / 2), 1_000, memory);
    expect(await wakeUpsFor(agentId)).toBe(0);
    await sweepOpenWork(at(SWEEP_HOLD_BACK_MS + 1_000), 1_000, memory);
    expect(await wakeUpsFor(agentId)).toBe(1);
  });

  it('queues at once when the queue has nothing waiting, or when its keys were lost (the sentinel key is gone)', async () => {
    await fresh();
    const memory = new SweepMemory();
    const empty = await agentWithLostWakeUp();
    await sweepOpenWork(worker.deps, 1_000, memory);
    expect(await wakeUpsFor(empty.agentId)).toBe(1);

    await fresh();
    const wiped = await agentWithLostWakeUp();
    await backlog();
    await baton.redis.del(names.queueSentinel(queue.name));
    await sweepOpenWork(at(1_000), 1_000, memory);
    expect(await wakeUpsFor(wiped.agentId)).toBe(1);
  });

  it('always queues an agent whose turn may be live (a killed writer), backlog or not', async () => {
    await fresh();
    const memory = new SweepMemory();
    const { agentId, handoffId } = await agentWithLostWakeUp();
    await baton.db.pool.query(`UPDATE handoffs SET delivery_state = 'SENDING', attempt_count = 1 WHERE id = $1`, [handoffId]);
    await backlog('job');
    await sweepOpenWork(worker.deps, 1_000, memory);
    expect(await wakeUpsFor(agentId)).toBe(1);
  });

  it('without a memory (one-off passes) it holds nothing back', async () => {
    await fresh();
    const { agentId } = await agentWithLostWakeUp();
    await backlog();
    await sweepOpenWork(worker.deps, 1_000);
    expect(await wakeUpsFor(agentId)).toBe(1);
  });

  it('queues at once when the waiting wake-ups have no job to take them (the scheduled flag is gone: a producer died between setting it and adding the job)', async () => {
    await fresh();
    const memory = new SweepMemory();
    const { agentId } = await agentWithLostWakeUp();
    await backlog();
    await baton.redis.del(names.wakeScheduled(queue.name));
    await sweepOpenWork(worker.deps, 1_000, memory);
    expect(await wakeUpsFor(agentId)).toBe(1);
    // The sweep's wake-up marked the queue scheduled again and added the job that takes the whole set.
    expect(await baton.redis.exists(names.wakeScheduled(queue.name))).toBe(1);
    expect((await queue.getJobs(['wait'])).filter((j) => j.name === WAKE_JOB_NAME)).toHaveLength(1);
  });
});
