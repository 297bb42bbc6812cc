import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TurnLocks, type TurnLock } from '../../libs/locks/turn-locks.ts';
import { deleteKeys, openRedis, scanKeys, type RedisClient } from '../../libs/queue/open-redis.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { TEST_REDIS_URL } from '../support/env.ts';
import { REDIS_TARGETS } from '../support/redis-targets.ts';
import { eventually } from '../support/eventually.ts';
import { startTcpProxy } from '../support/tcp-proxy.ts';
import { silentLogger } from '../support/test-baton.ts';
import { watchLoopLag } from '../support/loop-lag.ts';

/**
 * The lock lifetime these tests use. Each lock command is bounded by a third of it (the
 * default), so it must be long enough for a command to be answered on a busy machine: the waits
 * below derive from it, never from a quiet host.
 */
const TTL_MS = 3_000;

describe.each(REDIS_TARGETS)('on a $name', ({ url }) => {
  let redis: RedisClient;
  let names: RedisNames;
  let locks: TurnLocks;

  beforeAll(async () => {
    redis = openRedis(url, 'worker', silentLogger());
    names = new RedisNames(`t${randomBytes(4).toString('hex')}`);
    locks = new TurnLocks(redis, names, { ttlMs: TTL_MS, logger: silentLogger() });
  });

  afterAll(async () => {
    await scanKeys(redis, `${names.prefix}:*`, deleteKeys);
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
        expect(l.retryInMs).toBeLessThanOrEqual(TTL_MS);
      }
      if (winners[0]?.acquired) await winners[0].lock.release();
    });

    it('keeps the lock past its ttl while held (auto-extension) and frees it on release', async () => {
      const lock = await take('agent-long');
      const started = Date.now();
      // Watch the key's remaining time go back up: each rise is one extension by the holder.
      let extensions = 0;
      let last = await redis.pttl(names.turnLock('agent-long'));
      await eventually(
        async () => {
          const now = await redis.pttl(names.turnLock('agent-long'));
          if (now > last) extensions++;
          last = now;
          return extensions >= 2 && Date.now() - started > TTL_MS;
        },
        { what: 'two extensions, past the lifetime', timeoutMs: 4 * TTL_MS, intervalMs: 10 },
      );
      expect(lock.signal.aborted).toBe(false);
      expect(await redis.get(names.turnLock('agent-long'))).toBe(lock.token);
      expect(await lock.release()).toBe('released');
      expect(await redis.exists(names.turnLock('agent-long'))).toBe(0);
      expect((await locks.acquire('agent-long')).acquired).toBe(true);
    });

    it('never releases or extends a lock someone else now owns, and tells the old holder it lost it', async () => {
      const lock = await take('agent-stolen');
      await redis.set(names.turnLock('agent-stolen'), 'someone-else', 'PX', 5 * TTL_MS);
      // The holder learns at its next extension (every third of the lifetime).
      await eventually(() => lock.signal.aborted, { what: 'lost signal', timeoutMs: 2 * TTL_MS });
      expect(await lock.release()).toBe('not_held');
      expect(await redis.get(names.turnLock('agent-stolen'))).toBe('someone-else');
    });

    it('tells the holder it lost the lock when Redis loses the key (a wipe)', async () => {
      const lock = await take('agent-wiped');
      await redis.del(names.turnLock('agent-wiped'));
      await eventually(() => lock.signal.aborted, { what: 'lost signal', timeoutMs: 2 * TTL_MS });
    });

    it('draws a fencing number that only grows per agent, also after Redis lost every key', async () => {
      const first = await take('agent-fenced');
      await first.release();
      const second = await take('agent-fenced');
      expect(second.fence).toBeGreaterThan(first.fence);
      await second.release();
      // A wipe (FLUSHALL, a restart without persistence) loses the counter; the next number is
      // still larger, so Postgres keeps refusing the holders from before the wipe.
      await redis.del(names.turnLock('agent-fenced'), names.turnFence('agent-fenced'));
      const third = await take('agent-fenced');
      expect(third.fence).toBeGreaterThan(second.fence);
      await third.release();
      // A number ahead of the server clock (the clock went back): the next one is still larger.
      const ahead = third.fence + 10n ** 12n;
      await redis.set(names.turnFence('agent-fenced'), ahead.toString());
      const fourth = await take('agent-fenced');
      expect(fourth.fence).toBe(ahead + 1n);
      await fourth.release();
      const fifth = await take('agent-fenced');
      expect(fifth.fence).toBe(ahead + 2n);
      await fifth.release();
    });

    it('proves ownership right before a write, and refuses once someone else holds the lock', async () => {
      const lock = await take('agent-check');
      expect(await lock.stillHeld()).toBe(true);
      await redis.set(names.turnLock('agent-check'), 'someone-else', 'PX', 5 * TTL_MS);
      expect(await lock.stillHeld()).toBe(false);
      expect(lock.signal.aborted).toBe(true);
    });

    it('proves ownership with a read while most of the lifetime is proven left, without renewing it', async () => {
      // A lifetime long enough that the extension timer (every third of it) stays out of the way.
      const slow = new TurnLocks(redis, names, { ttlMs: 10 * TTL_MS, logger: silentLogger() });
      const r = await slow.acquire('agent-read-proof');
      if (!r.acquired) throw new Error('expected to acquire');
      const lock = r.lock;
      await new Promise((resolve) => setTimeout(resolve, 150));
      const before = await redis.pttl(names.turnLock('agent-read-proof'));
      expect(await lock.stillHeld()).toBe(true);
      // Not renewed by the check (an extension would have set it back to the full lifetime).
      expect(await redis.pttl(names.turnLock('agent-read-proof'))).toBeLessThanOrEqual(before);
      await lock.release();
    });

    it('tells the holder on release to look again when someone found its lock held, and only then', async () => {
      const lock = await take('agent-noted');
      // A job that lost the race for the lock leaves a pending wake-up (acquire), as does a producer
      // that committed work and added no job because the turn was held (wakeHolderIfHeld).
      expect((await locks.acquire('agent-noted')).acquired).toBe(false);
      expect(await lock.release()).toBe('recheck');
      const quiet = await take('agent-noted');
      expect(await quiet.release()).toBe('released');
      const held = await take('agent-noted');
      expect(await locks.wakeHolderIfHeld(['agent-noted', 'agent-not-held'])).toEqual([true, false]);
      expect(await held.release()).toBe('recheck');
      // Nothing is noted for a free agent.
      expect(await redis.exists(names.pendingWakeUp('agent-not-held'))).toBe(0);
    });

    it('reports which agents are held in one round trip', async () => {
      const lock = await take('agent-held');
      expect(await locks.held(['agent-held', 'agent-free'])).toEqual([true, false]);
      await lock.release();
    });

    it('answers held and busy for many agents whose keys lie in many slots (every node of a cluster)', async () => {
      const ids = Array.from({ length: 300 }, (_, i) => `agent-many-${i}`);
      const taken = await Promise.all(ids.filter((_, i) => i % 3 === 0).map(take));
      await Promise.all(ids.filter((_, i) => i % 3 === 1).map((id) => locks.backOff(id, 5 * TTL_MS)));
      expect(await locks.held(ids)).toEqual(ids.map((_, i) => i % 3 === 0));
      expect(await locks.busy(ids)).toEqual(ids.map((_, i) => i % 3 !== 2));
      expect(await locks.wakeHolderIfHeld(ids)).toEqual(ids.map((_, i) => i % 3 === 0));
      expect(await Promise.all(taken.map((l) => l.release()))).toEqual(taken.map(() => 'recheck'));
    });
  });
});

/**
 * Only on a single server: the proxy stands between one client and one Redis (a cluster client
 * learns every node's address from the cluster and would go around it).
 */
describe('the turn lock behind a frozen connection', () => {
  let redis: RedisClient;
  let names: RedisNames;
  let locks: TurnLocks;

  beforeAll(() => {
    redis = openRedis(TEST_REDIS_URL, 'worker', silentLogger());
    names = new RedisNames(`t${randomBytes(4).toString('hex')}`);
    locks = new TurnLocks(redis, names, { ttlMs: TTL_MS, logger: silentLogger() });
  });

  afterAll(async () => {
    await scanKeys(redis, `${names.prefix}:*`, deleteKeys);
    await redis.quit();
  });

  it('a holder cut off from Redis (a partition that answers nothing) learns it lost the lock within its lifetime, while another takes it over', async () => {
    const port = Number(new URL(TEST_REDIS_URL).port || 6379);
    const proxy = await startTcpProxy(port, new URL(TEST_REDIS_URL).hostname);
    const commandTimeoutMs = TTL_MS / 3;
    const behind = openRedis(`redis://127.0.0.1:${proxy.port}`, 'locks', silentLogger(), { commandTimeoutMs });
    const partitioned = new TurnLocks(behind, names, { ttlMs: TTL_MS, logger: silentLogger(), commandTimeoutMs });
    const lag = watchLoopLag();
    try {
      const r = await partitioned.acquire('agent-partition');
      if (!r.acquired) throw new Error('expected to acquire');
      proxy.freeze();
      const frozenAt = Date.now();
      // Every command is bounded: the check answers "not held" instead of waiting on Redis.
      expect(await r.lock.stillHeld()).toBe(false);
      expect(Date.now() - frozenAt).toBeLessThan(commandTimeoutMs + lag.maxMs() + 100);
      await eventually(() => r.lock.signal.aborted, { what: 'the partitioned holder gives up', timeoutMs: 2 * TTL_MS, intervalMs: 10 });
      // The holder gave up no later than the key expires for everyone else (its lifetime, counted
      // from the last proof, checked every third of it), plus how late this machine ran timers.
      expect(Date.now() - frozenAt).toBeLessThan(TTL_MS + TTL_MS / 3 + lag.maxMs() + 100);
      const other: TurnLock = await eventually(
        async () => {
          const taken = await locks.acquire('agent-partition');
          if (!taken.acquired) throw new Error('still held');
          return taken.lock;
        },
        { what: 'another worker takes the lock', timeoutMs: 3 * TTL_MS, intervalMs: 20 },
      );
      expect(other.fence).toBeGreaterThan(r.lock.fence);
      await other.release();
    } finally {
      lag.stop();
      proxy.thaw();
      behind.disconnect();
      await proxy.close();
    }
  });
});

/** On one server, a producer's check of many agents is one script call (a cluster needs one per agent). */
describe('wakeHolderIfHeld on a single server', () => {
  it('asks for all the agents of a batch in one command, and leaves pending wake-ups only for the held ones', async () => {
    const redis = openRedis(TEST_REDIS_URL, 'locks', silentLogger());
    const names = new RedisNames(`t${randomBytes(4).toString('hex')}`);
    const locks = new TurnLocks(redis, names, { ttlMs: 5_000, logger: silentLogger() });
    try {
      const ids = Array.from({ length: 40 }, (_, i) => `agent-batch-${i}`);
      const held = await Promise.all(ids.filter((_, i) => i % 4 === 0).map((id) => locks.acquire(id)));
      const sent: string[] = [];
      const send = redis.sendCommand.bind(redis);
      redis.sendCommand = ((command: { name: string }, ...rest: unknown[]) => {
        sent.push(command.name);
        return (send as (...a: unknown[]) => unknown)(command, ...rest);
      }) as typeof redis.sendCommand;
      expect(await locks.wakeHolderIfHeld(ids)).toEqual(ids.map((_, i) => i % 4 === 0));
      expect(sent.filter((name) => name !== 'script')).toEqual(['evalsha']);
      redis.sendCommand = send;
      expect(await redis.exists(...ids.filter((_, i) => i % 4 !== 0).map((id) => names.pendingWakeUp(id)))).toBe(0);
      expect(await redis.exists(...ids.filter((_, i) => i % 4 === 0).map((id) => names.pendingWakeUp(id)))).toBe(10);
      for (const r of held) if (r.acquired) expect(await r.lock.release()).toBe('recheck');
    } finally {
      await scanKeys(redis, `${names.prefix}:*`, deleteKeys);
      await redis.quit();
    }
  });
});
