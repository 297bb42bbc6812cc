import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { DeliveryQueues, WAKE_SCHEDULED_MS } from '../../libs/queue/delivery-queues.ts';
import { WAKE_JOB_NAME } from '../../libs/queue/dispatch-job.ts';
import { deleteKeys, openRedis, scanKeys, type RedisClient } from '../../libs/queue/open-redis.ts';
import { JOB_IDS, RedisNames } from '../../libs/queue/redis-names.ts';
import { REDIS_TARGETS } from '../support/redis-targets.ts';
import { eventually } from '../support/eventually.ts';
import { silentLogger } from '../support/test-baton.ts';

/**
 * The producer side of the delivery queues, on a single server and on a cluster: immediate
 * wake-ups go to the queue's wake-up set, and only the one that sets the queue's scheduled flag adds a
 * wake job; taking the set empty clears it, so the next wake-up adds a job again. Nothing consumes the
 * queue here: the test plays the drainer.
 */
describe.each(REDIS_TARGETS)('on a $name', ({ url }) => {
  let redis: RedisClient;
  let names: RedisNames;
  let queues: DeliveryQueues;
  /** The same BullMQ queue, only to read its jobs. */
  let inspect: Queue;
  const name = () => names.deliveryQueue('demo', 0);

  beforeAll(async () => {
    redis = openRedis(url, 'worker', silentLogger());
    names = new RedisNames(`t${randomBytes(4).toString('hex')}`);
    queues = new DeliveryQueues({ connection: redis, names, shards: 1, logger: silentLogger() });
    inspect = new Queue(name(), { connection: redis, prefix: names.bullPrefix });
  });

  afterAll(async () => {
    await inspect.close();
    await queues.close();
    await scanKeys(redis, `${names.bullPrefix}:*`, deleteKeys);
    await redis.quit();
  });

  beforeEach(async () => {
    await inspect.obliterate({ force: true });
    await redis.del(names.wakeUps(name()));
    await redis.del(names.wakeScheduled(name()));
  });

  const wakeJobs = async () => (await inspect.getJobs(['wait'])).filter((j) => j.name === WAKE_JOB_NAME);
  const sent = (agentId: string) =>
    queues.enqueue({ agentId, provider: 'demo', cause: 'sent', handoffId: randomUUID() }, JOB_IDS.sent(randomUUID()));

  it('keeps each woken agent once, in the order first woken, and adds one wake job for them all while the queue is scheduled', async () => {
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    await sent(a);
    await sent(b);
    await Promise.all([
      sent(a),
      sent(c),
      queues.enqueueMany([{ job: { agentId: b, provider: 'demo', cause: 'sweep' }, jobId: JOB_IDS.sweep(b, 1) }]),
    ]);
    expect(await queues.waitingWakeUps(name())).toEqual([a, b, c]);
    const jobs = await wakeJobs();
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.data).toEqual({ provider: 'demo' });
    expect((await queues.jobCounts('demo')).waiting).toBe(4);
  });

  it('taking the set empty clears the scheduled flag in the same step: the next wake-up adds a new job, none is left without one', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await sent(a);
    expect(await wakeJobs()).toHaveLength(1);
    expect(await queues.takeWakeUps(name(), 10)).toEqual([a]);
    // Still scheduled: the drainer has not yet found the set empty, so a wake-up now adds no job (it takes it).
    await sent(b);
    expect(await wakeJobs()).toHaveLength(1);
    expect(await queues.takeWakeUps(name(), 10)).toEqual([b]);
    expect(await queues.takeWakeUps(name(), 10)).toEqual([]);
    expect(await redis.exists(names.wakeScheduled(name()))).toBe(0);
    await sent(a);
    expect(await wakeJobs()).toHaveLength(2);
  });

  it('a lingering drainer keeps the queue scheduled, but the first wake-up meanwhile adds a job (it waits for no poll), the next ones none', async () => {
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    await sent(a);
    expect(await queues.takeWakeUps(name(), 10)).toEqual([a]);
    expect(await queues.takeWakeUps(name(), 10, true)).toEqual([]);
    expect(await redis.exists(names.wakeScheduled(name()))).toBe(1);
    // The drainer only lingers: the first wake-up adds a job that takes it at once...
    await sent(b);
    expect(await wakeJobs()).toHaveLength(2);
    // ...and marks the queue scheduled again, so the next one rides on that job.
    await sent(c);
    expect(await wakeJobs()).toHaveLength(2);
    // The lingering drainer may still take them first (the new job then finds the set empty).
    expect(await queues.takeWakeUps(name(), 10, true)).toEqual([b, c]);
    expect(await queues.takeWakeUps(name(), 10)).toEqual([]);
    expect(await redis.exists(names.wakeScheduled(name()))).toBe(0);
  });

  it('takes at most the number asked, oldest first', async () => {
    const agents = Array.from({ length: 5 }, () => randomUUID());
    for (const a of agents) await sent(a);
    expect(await queues.takeWakeUps(name(), 2)).toEqual(agents.slice(0, 2));
    expect(await queues.takeWakeUps(name(), 10)).toEqual(agents.slice(2));
  });

  it('a drainer that stops taking lets the flag expire, and the next wake-up adds a job another worker can take', async () => {
    await sent(randomUUID());
    // The job is lost (keys deleted one by one), or its drainer is busy: the flag stays for WAKE_SCHEDULED_MS.
    await inspect.obliterate({ force: true });
    await sent(randomUUID());
    expect(await wakeJobs()).toHaveLength(0);
    await eventually(async () => expect(await redis.exists(names.wakeScheduled(name()))).toBe(0), {
      timeoutMs: WAKE_SCHEDULED_MS * 3,
      what: 'the scheduled flag to expire',
    });
    await sent(randomUUID());
    expect(await wakeJobs()).toHaveLength(1);
    expect(await queues.waitingWakeUps(name())).toHaveLength(3);
  });

  it('a wake-up for later is a delayed job of the agent, with its own id', async () => {
    const agentId = randomUUID();
    const id = JOB_IDS.dueAt(agentId, Date.now() + 60_000, 'token');
    await queues.enqueue({ agentId, provider: 'demo', cause: 'due' }, id, 60_000);
    await queues.enqueue({ agentId, provider: 'demo', cause: 'due' }, id, 60_000);
    expect((await inspect.getJobs(['delayed'])).map((j) => j.id)).toEqual([id]);
    expect(await queues.waitingWakeUps(name())).toEqual([]);
  });
});
