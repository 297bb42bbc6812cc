import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { TurnLocks, type TurnLock } from '../../libs/locks/turn-locks.ts';
import { openRedis } from '../../libs/queue/open-redis.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { TEST_REDIS_URL } from '../support/env.ts';
import { eventually } from '../support/eventually.ts';
import { silentLogger } from '../support/test-baton.ts';

let redis: Redis;
let names: RedisNames;
let locks: TurnLocks;

beforeAll(async () => {
  redis = openRedis(TEST_REDIS_URL, 'worker', silentLogger());
  names = new RedisNames(`t${randomBytes(4).toString('hex')}`);
  locks = new TurnLocks(redis, names, { ttlMs: 300, logger: silentLogger() });
});

afterAll(async () => {
  const keys = await redis.keys(`${names.prefix}:*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
});

async function take(agent: string): Promise<TurnLock> {
  const r = await locks.acquire(agent);
  if (!r.acquired) throw new Error('expected to acquire');
  return r.lock;
}

describe('the per-agent turn lock', () => {
  it('lets exactly one of many concurrent callers hold an agent', async () => {
    const results = await Promise.all(Array.from({ length: 50 }, () => locks.acquire('agent-race')));
    const winners = results.filter((r) => r.acquired);
    expect(winners).toHaveLength(1);
    const losers = results.filter((r) => !r.acquired);
    for (const l of losers) {
      if (l.acquired) continue;
      expect(l.holder).toBe(winners[0]!.acquired ? winners[0]!.lock.token : null);
      expect(l.retryInMs).toBeGreaterThan(0);
      expect(l.retryInMs).toBeLessThanOrEqual(300);
    }
    if (winners[0]?.acquired) await winners[0].lock.release();
  });

  it('keeps the lock past its ttl while held (auto-extension) and frees it on release', async () => {
    const lock = await take('agent-long');
    const started = Date.now();
    // Watch the key's remaining time go back up: each rise is one extension by the holder.
    let extensions = 0;
    let last = await redis.pttl(names.turnLock('agent-long'));
    await eventually(async () => {
      const now = await redis.pttl(names.turnLock('agent-long'));
      if (now > last) extensions++;
      last = now;
      return extensions >= 4 && Date.now() - started > 300;
    }, { what: 'four extensions', timeoutMs: 3_000, intervalMs: 10 });
    expect(lock.signal.aborted).toBe(false);
    expect(await redis.get(names.turnLock('agent-long'))).toBe(lock.token);
    expect(await lock.release()).toBe(true);
    expect(await redis.exists(names.turnLock('agent-long'))).toBe(0);
    expect((await locks.acquire('agent-long')).acquired).toBe(true);
  });

  it('never releases or extends a lock someone else now owns, and tells the old holder it lost it', async () => {
    const lock = await take('agent-stolen');
    await redis.set(names.turnLock('agent-stolen'), 'someone-else', 'PX', 5_000);
    await eventually(() => lock.signal.aborted, { what: 'lost signal', timeoutMs: 2_000 });
    expect(await lock.release()).toBe(false);
    expect(await redis.get(names.turnLock('agent-stolen'))).toBe('someone-else');
  });

  it('tells the holder it lost the lock when Redis loses the key (a wipe)', async () => {
    const lock = await take('agent-wiped');
    await redis.del(names.turnLock('agent-wiped'));
    await eventually(() => lock.signal.aborted, { what: 'lost signal', timeoutMs: 2_000 });
  });

  it('reports which agents are held in one round trip', async () => {
    const lock = await take('agent-held');
    expect(await locks.held(['agent-held', 'agent-free'])).toEqual([true, false]);
    await lock.release();
  });
});
