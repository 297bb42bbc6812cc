import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { DeliveryQueues } from '../../libs/queue/delivery-queues.ts';
import { deleteKeys, openRedis, scanKeys, type RedisClient } from '../../libs/queue/open-redis.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { JOB_IDS } from '../../libs/queue/redis-names.ts';
import { REDIS_TARGETS } from '../support/redis-targets.ts';
import { eventually } from '../support/eventually.ts';
import { silentLogger } from '../support/test-baton.ts';

describe.each(REDIS_TARGETS)('on a $name', ({ url }) => {
  let redis: RedisClient;
  let names: RedisNames;
  let queues: DeliveryQueues;
  /** The same BullMQ queue, only to read its deduplication state. */
  let inspect: Queue;

  beforeAll(async () => {
    redis = openRedis(url, 'worker', silentLogger());
    names = new RedisNames(`t${randomBytes(4).toString('hex')}`);
    queues = new DeliveryQueues({ connection: redis, names, shards: 1, logger: silentLogger(), sweepDedupMs: 400 });
    inspect = new Queue(names.deliveryQueue('demo', 0), { connection: redis, prefix: names.bullPrefix });
  });

  afterAll(async () => {
    await inspect.close();
    await queues.close();
    await scanKeys(redis, `${names.bullPrefix}:*`, deleteKeys);
    await redis.quit();
  });

  const waitKey = () => `${names.bullPrefix}:${names.deliveryQueue('demo', 0)}:wait`;
  const waiting = () => redis.lrange(waitKey(), 0, -1);

  describe('delivery queue producers', () => {
    it('adds at most one sweep job per agent within the window, and another after it', async () => {
      const agentId = randomUUID();
      const sweep = (n: number) => queues.enqueue({ agentId, provider: 'demo', cause: 'sweep' }, JOB_IDS.sweep(agentId, n));
      await sweep(1);
      await sweep(2);
      await sweep(3);
      expect((await waiting()).filter((id) => id.startsWith(`sweep-${agentId}`))).toEqual([JOB_IDS.sweep(agentId, 1)]);
      expect(await inspect.getDeduplicationJobId(`sweep-${agentId}`)).toBe(JOB_IDS.sweep(agentId, 1));
      // The window ends when BullMQ's deduplication key expires: wait for that, not for a guess.
      await eventually(async () => expect(await inspect.getDeduplicationJobId(`sweep-${agentId}`)).toBeNull(), { timeoutMs: 5_000, what: 'the sweep deduplication window to end' });
      await sweep(4);
      expect((await waiting()).filter((id) => id.startsWith(`sweep-${agentId}`))).toEqual([JOB_IDS.sweep(agentId, 4), JOB_IDS.sweep(agentId, 1)]);
    });

    it('never merges a wake-up for a commit into another job of the agent, even one orphaned by a partial key deletion', async () => {
      const agentId = randomUUID();
      const first = randomUUID();
      await queues.enqueue({ agentId, provider: 'demo', cause: 'sent', handoffId: first }, JOB_IDS.sent(first));
      // Someone deletes keys one by one: the wait list goes, the job's hash stays behind.
      await redis.del(waitKey());
      expect(await redis.exists(`${names.bullPrefix}:${names.deliveryQueue('demo', 0)}:${JOB_IDS.sent(first)}`)).toBe(1);
      const second = randomUUID();
      await queues.enqueue({ agentId, provider: 'demo', cause: 'sent', handoffId: second }, JOB_IDS.sent(second));
      expect(await waiting()).toContain(JOB_IDS.sent(second));
    });
  });
});
