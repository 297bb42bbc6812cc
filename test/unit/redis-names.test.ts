import { describe, expect, it } from 'vitest';
import { JOB_IDS, RedisNames } from '../../libs/queue/redis-names.ts';

describe('Redis names', () => {
  const names = new RedisNames('baton');

  it('names delivery queues per provider shard, wrapped in a hash tag so each queue lives in one cluster slot', () => {
    expect(names.deliveryQueue('demo', 3)).toBe('{delivery-demo-3}');
    expect(names.deliveryQueue('demo', 3)).not.toContain(':');
    expect(names.deliveryQueue('codex', 3, 'host-a')).toBe('{delivery-codex.host-a-3}');
    expect(names.deliveryQueue('codex', 3, '')).toBe('{delivery-codex-3}');
  });

  it('names the turn lock per agent under the prefix', () => {
    expect(names.turnLock('0190a1b2-0000-7000-8000-000000000001')).toBe('baton:turn-lock:{0190a1b2-0000-7000-8000-000000000001}');
    expect(names.turnFence('0190a1b2-0000-7000-8000-000000000001')).toBe('baton:turn-fence:{0190a1b2-0000-7000-8000-000000000001}');
    expect(names.reconcilerLeader('demo')).toBe('baton:reconciler-leader:{demo}');
    expect(names.eventStream()).toBe('baton:{events}:stream');
    expect(names.authChanged()).toBe('baton:{auth}:changed');
    expect(names.backoff('a1')).toBe('baton:backoff:{a1}');
    // The pending wake-up shares the lock's slot (the release script takes both); the queue's
    // sentinel key shares its queue's.
    expect(names.pendingWakeUp('a1')).toBe('baton:turn-recheck:{a1}');
    expect(names.queueSentinel(names.deliveryQueue('demo', 2))).toBe('baton:{delivery-demo-2}:sweep-mark');
  });

  it('keeps the key strings of the older names, so processes of two versions in one rolling upgrade set and read the same keys', () => {
    // Renamed in the code (arm, recheck note, sweep mark), never on the wire: a producer of one
    // version testing a flag the drainer of the other never clears would add no wake job.
    expect(names.wakeUps('{delivery-demo-0}')).toBe('baton:{delivery-demo-0}:wake-ups');
    expect(names.wakeScheduled('{delivery-demo-0}')).toBe('baton:{delivery-demo-0}:wake-arm');
    expect(names.pendingWakeUp('a1')).toBe('baton:turn-recheck:{a1}');
    expect(names.queueSentinel('{delivery-demo-0}')).toBe('baton:{delivery-demo-0}:sweep-mark');
  });

  it('names the deployment (agents.deployment) by the prefix itself: one deployment, one set of queues and turn locks', () => {
    expect(names.deployment).toBe('baton');
    expect(new RedisNames('baton-demo-a1b2c3').deployment).toBe('baton-demo-a1b2c3');
  });

  it('names the shared rate-limit counters under the prefix, each caller under its own hash tag', () => {
    expect(names.rateLimitNamespace + names.rateLimitSubject('token', 't1')).toBe('baton:rate-limit:{token-t1}');
    expect(names.rateLimitNamespace + names.rateLimitSubject('ip', '127.0.0.1')).toBe('baton:rate-limit:{ip-127.0.0.1}');
    expect(names.browserSession('ab12')).toBe('baton:browser-session:{ab12}');
  });

  it('puts an agent on the same shard every time, spreading agents over all shards', () => {
    const ids = Array.from({ length: 2000 }, (_, i) => `agent-${i}`);
    const shards = ids.map((id) => names.shardOf(id, 8));
    expect(ids.map((id) => names.shardOf(id, 8))).toEqual(shards);
    const counts = new Map<number, number>();
    for (const s of shards) counts.set(s, (counts.get(s) ?? 0) + 1);
    expect([...counts.keys()].sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    for (const n of counts.values()) expect(n).toBeGreaterThan(150);
  });

  it('gives every wake-up cause its own deterministic job id', () => {
    expect(JOB_IDS.sent('h1')).toBe('sent-h1');
    expect(JOB_IDS.afterTurn('a1', 't1')).toBe('after-a1-t1');
    expect(JOB_IDS.lockRetry('a1', 't1')).toBe('lockretry-a1-t1');
    expect(JOB_IDS.dueAt('a1', 1000, 't1')).toBe('due-a1-1000-t1');
    expect(JOB_IDS.sweep('a1', 7)).toBe('sweep-a1-7');
  });

  it('refuses a prefix that would break key names', () => {
    expect(() => new RedisNames('a:b')).toThrow();
    expect(() => new RedisNames('')).toThrow();
  });
});
