import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerAgent } from '../../libs/handoffs/manage-agents.ts';
import { sendHandoff } from '../../libs/handoffs/send-handoff.ts';
import { WAKE_JOB_NAME } from '../../libs/queue/dispatch-job.ts';
import { DeliveryQueues, WAKE_SCHEDULED_MS } from '../../libs/queue/delivery-queues.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { REDIS_TARGETS } from '../support/redis-targets.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * One wake job serves many agents: handoffs to 40 agents sent while no worker runs leave one
 * wake job and 40 agents in the queue's wake-up set; a worker with 8 slots then delivers all of
 * them, each exactly once, and leaves the set empty and the queue's scheduled flag cleared.
 */
describe.each(REDIS_TARGETS)('on a $name', ({ url }) => {
  let baton: TestBaton;
  let queues: DeliveryQueues;
  let names: RedisNames;
  let queue: Queue;
  const AGENTS = 40;

  beforeAll(async () => {
    baton = await startTestBaton({ redisUrl: url, queueShards: 1 });
    names = new RedisNames(baton.prefix);
    queues = new DeliveryQueues({ connection: baton.redis, names, shards: 1, logger: baton.logger });
    queue = new Queue(queues.queueName('demo', 'x'), { connection: baton.redis, prefix: names.bullPrefix });
    await registerAgent(baton.core, { project: 'default', handle: 'sender', provider: 'demo' });
  }, 60_000);

  afterAll(async () => {
    await queue?.close();
    await queues?.close();
    await baton?.stop();
  });

  it('many agents woken while no worker runs wait in one set behind one wake job, and one worker delivers them all, once each', async () => {
    const agents: string[] = [];
    for (let i = 0; i < AGENTS; i++) {
      agents.push(
        (await registerAgent(baton.core, { project: 'default', handle: `w${i}`, provider: 'demo', providerSettings: { thinkMs: 0 } })).id,
      );
    }
    const sendingFrom = Date.now();
    const handoffs = await Promise.all(
      agents.map(
        async (_a, i) =>
          (await sendHandoff(baton.core, { project: 'default', from: 'sender', to: `w${i}`, message: `task ${i}` })).handoff.id,
      ),
    );
    const name = queue.name;
    await eventually(async () => expect(await queues.waitingWakeUps(name)).toHaveLength(AGENTS), { what: 'every wake-up in the set' });
    const sendingMs = Date.now() - sendingFrom;
    expect(new Set(await queues.waitingWakeUps(name))).toEqual(new Set(agents));
    const waiting = await queue.getJobs(['wait']);
    // One wake job per time the queue is marked scheduled: exactly one when the sends took less than the flag's
    // life (a quiet host), never one per agent on a loaded one.
    const wakeJobs = waiting.filter((j) => j.name === WAKE_JOB_NAME).length;
    expect(wakeJobs).toBeGreaterThanOrEqual(1);
    expect(wakeJobs).toBeLessThanOrEqual(1 + Math.floor(sendingMs / WAKE_SCHEDULED_MS));
    expect(waiting.filter((j) => j.name !== WAKE_JOB_NAME)).toHaveLength(0);

    baton.startWorker({ concurrency: 8 });
    await eventually(
      async () => {
        const { rows } = await baton.db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM handoffs WHERE id = ANY($1::uuid[]) AND delivery_state = 'RETURNED'`,
          [handoffs],
        );
        expect(rows[0]!.n).toBe(AGENTS);
      },
      { timeoutMs: 20_000, what: 'every handoff RETURNED' },
    );
    const { rows } = await baton.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM delivery_attempts WHERE handoff_id = ANY($1::uuid[])`,
      [handoffs],
    );
    expect(rows[0]!.n).toBe(AGENTS);
    for (const id of handoffs) expect(baton.host.writesByHandoff().get(id)).toHaveLength(1);
    await eventually(async () => expect(await baton.redis.exists(names.wakeScheduled(name))).toBe(0), {
      what: 'the scheduled flag cleared',
    });
    expect(await queues.waitingWakeUps(name)).toEqual([]);
  });
});
