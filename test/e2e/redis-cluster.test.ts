import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from 'ioredis';
import { DemoAgentHost, findWriteViolations } from '../../libs/adapters/demo/demo-agent-host.ts';
import { serveDemoHost } from '../../libs/adapters/demo/demo-host-server.ts';
import { openRedis, scanKeys } from '../../libs/queue/open-redis.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { freePort } from '../../libs/processes/embedded-infra.ts';
import { eventually } from '../support/eventually.ts';
import { startRedisCluster, type TestRedisCluster } from '../support/redis-cluster.ts';
import { clusterUrl } from '../support/redis-targets.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { openEvents } from '../support/sse-follower.ts';
import { createTestDatabase } from '../support/test-database.ts';
import { silentLogger } from '../support/test-baton.ts';

/**
 * Baton as processes on a real Redis Cluster (3 primaries on loopback, no replicas, started
 * here so the test may kill one): an API process and two worker processes, every connection an
 * ioredis Cluster client (`REDIS_URL=redis+cluster://...`). A primary is SIGKILLed in the
 * middle of the run and started again empty: its slots are away for a while, and the queues,
 * locks and fences it held are gone. Every handoff must still land exactly once, in send order
 * per agent, never during another turn of its session.
 */

const AGENTS = 8;
const HANDOFFS = 48;

let cluster: TestRedisCluster;
let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sessions: DemoAgentHost;
let served: Awaited<ReturnType<typeof serveDemoHost>>;
let api: BatonProcess;
let apiUrl: string;
let token: string;
const home = mkdtempSync(join(tmpdir(), 'baton-cluster-home-'));
const prefix = `tc${randomBytes(4).toString('hex')}`;
const workers: BatonProcess[] = [];
/** Every key of the deployment seen while the run went on (some live for less than a second). */
const keysSeen = new Set<string>();

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json().catch(() => null)) as any };
}

beforeAll(async () => {
  cluster = await startRedisCluster({ primaries: 3 });
  db = await createTestDatabase();
  sessions = new DemoAgentHost();
  served = await serveDemoHost(sessions);
  const port = await freePort();
  apiUrl = `http://127.0.0.1:${port}`;
  const common = {
    DATABASE_URL: db.url,
    REDIS_URL: cluster.url,
    BATON_REDIS_PREFIX: prefix,
    BATON_QUEUE_SHARDS: '4',
    BATON_HOME: home,
    BATON_LOG_LEVEL: 'warn',
  };
  api = spawnBaton(['api'], { ...common, BATON_API_PORT: String(port) });
  await api.waitFor(/Baton API on/, 30_000);
  token = readFileSync(join(home, 'admin.token'), 'utf8').trim();
  for (let i = 0; i < 2; i++) {
    workers.push(
      spawnBaton(['worker'], {
        ...common,
        BATON_DEMO_HOST_URL: served.url,
        BATON_TURN_LOCK_TTL_MS: '1500',
        BATON_JOB_LOCK_MS: '1500',
        BATON_STALLED_INTERVAL_MS: '500',
        BATON_RECONCILE_INTERVAL_MS: '500',
        BATON_SHUTDOWN_GRACE_MS: '1000',
        BATON_LOG_LEVEL: 'info',
      }),
    );
  }
  await Promise.all(workers.map((w) => w.waitFor(/delivery worker started/, 30_000)));
  expect((await call('POST', '/v1/agents', { id: 'dispatcher', provider: 'manual' })).status).toBe(201);
  for (let i = 0; i < AGENTS; i++) {
    expect(
      (await call('POST', '/v1/agents', { id: `agent-${i}`, provider: 'demo', settings: { thinkMs: 60 + ((i * 53) % 200) } })).status,
    ).toBe(201);
  }
}, 90_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await api?.stop('SIGKILL');
  await served?.close();
  await cluster?.stop();
  await db?.drop();
  rmSync(home, { recursive: true, force: true });
});

async function returnedCount(): Promise<number> {
  const { body } = await call('GET', '/v1/handoffs?state=RETURNED&limit=200');
  return (body.handoffs ?? body.items ?? []).length;
}

describe('Baton on a Redis Cluster', () => {
  it('spreads one provider’s delivery queues over several nodes, each queue in one slot', async () => {
    const redis = openRedis(clusterUrl(), 'producer', silentLogger()) as Cluster;
    try {
      const names = new RedisNames('baton');
      const slots = await Promise.all(
        [0, 1, 2, 3].map((s) => redis.call('CLUSTER', 'KEYSLOT', names.deliveryQueue('demo', s)) as Promise<number>),
      );
      // Every BullMQ key of one queue carries the queue's tag: one slot per queue.
      for (const suffix of ['wait', 'active', 'meta', 'events', 'job-1']) {
        expect(await redis.call('CLUSTER', 'KEYSLOT', `baton:${names.deliveryQueue('demo', 0)}:${suffix}`)).toBe(slots[0]);
      }
      const ranges = await redis.cluster('SLOTS');
      const nodeOf = (slot: number) => ranges.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1];
      expect(new Set(slots.map(nodeOf)).size).toBeGreaterThanOrEqual(2);
    } finally {
      redis.disconnect();
    }
  });

  it('delivers every handoff exactly once, in order, through a primary killed and started again empty', async () => {
    const sampler = openRedis(cluster.url, 'producer', silentLogger());
    let sampling = true;
    const sampled = (async () => {
      while (sampling) {
        // A sample that meets a failing-over node is skipped; the next one reads again.
        await scanKeys(sampler, `${prefix}:*`, async (keys) => void keys.forEach((k) => keysSeen.add(k))).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const events = await openEvents(apiUrl, token);
    const ids: string[] = [];
    const byAgent = new Map<string, string[]>();
    for (let i = 0; i < HANDOFFS; i++) {
      const to = `agent-${i % AGENTS}`;
      const res = await call('POST', '/v1/handoffs', { from: 'dispatcher', to, title: `task ${i}`, message: `task ${i}` });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
      byAgent.set(to, [...(byAgent.get(to) ?? []), res.body.id]);
    }
    // The live feed runs over the cluster too (Redis Stream wake-ups, XREAD on its node).
    await events.until((list) => list.some((e) => e.handoffId === ids[0]), 'the first handoff in the event feed');

    await eventually(async () => (await returnedCount()) >= HANDOFFS / 4, {
      timeoutMs: 60_000,
      what: 'a quarter RETURNED before the fault',
    });
    const victim = cluster.nodes[1]!;
    await victim.kill();
    await new Promise((r) => setTimeout(r, 1_500));
    await victim.start();
    await cluster.waitHealthy(30_000);

    await eventually(async () => expect(await returnedCount()).toBe(HANDOFFS), {
      timeoutMs: 90_000,
      intervalMs: 250,
      what: 'every handoff RETURNED after the node came back',
    });
    await events.close();
    sampling = false;
    await sampled;
    sampler.disconnect();

    for (const [agent, sent] of byAgent) {
      // One write per handoff, in send order, and never one while another turn was live.
      expect(sessions.history(agent).map((t) => t.handoffId)).toEqual(sent);
      expect(findWriteViolations(sessions.writes(agent))).toEqual([]);
    }
  }, 180_000);

  it('wrote only hash-tagged keys: no key of the deployment lies outside a tag', async () => {
    // Sampled every 100 ms during the run above: queues, locks, fences, back-offs, the
    // reconciler's lead, the event stream, sessions and rate counters as they came and went.
    expect(keysSeen.size).toBeGreaterThan(0);
    expect([...keysSeen].some((k) => k.includes(':reconciler-leader:'))).toBe(true);
    expect([...keysSeen].some((k) => k.includes(':turn-lock:'))).toBe(true);
    expect([...keysSeen].filter((k) => !/\{[^}]+\}/.test(k))).toEqual([]);
  });
});
