import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DemoAgentHost } from '../../libs/adapters/demo/demo-agent-host.ts';
import { serveDemoHost } from '../../libs/adapters/demo/demo-host-server.ts';
import { eventually } from '../support/eventually.ts';
import { spawnBaton, SPAWNED_FIRST_TURN_MS, type BatonProcess } from '../support/spawn-baton.ts';
import { Receiver } from '../support/subscription-receiver.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { TEST_REDIS_URL } from '../support/env.ts';

/**
 * A subscription across a SIGKILL of the worker process delivering it: two `baton worker`
 * processes deliver 200 handoffs to demo agents and follow the event log; once part of the
 * events reached the receiver, the worker holding the subscription's lease is killed. The other
 * takes the lease when it runs out, and every event arrives, in order per handoff, a repeat
 * only under the delivery id it had.
 */
const HANDOFFS = 200;

let baton: TestBaton;
let served: Awaited<ReturnType<typeof serveDemoHost>>;
const workers = new Map<number, BatonProcess>();
const receiver = new Receiver();

function startWorker(): BatonProcess {
  const w = spawnBaton(['worker'], {
    DATABASE_URL: baton.databaseUrl,
    REDIS_URL: TEST_REDIS_URL,
    BATON_REDIS_PREFIX: baton.prefix,
    BATON_QUEUE_SHARDS: '2',
    BATON_DEMO_HOST_URL: served.url,
    BATON_LOG_LEVEL: 'warn',
    BATON_RECONCILE_INTERVAL_MS: '500',
    BATON_SHUTDOWN_GRACE_MS: '1000',
  });
  workers.set(w.pid, w);
  void w.exited().then(() => workers.delete(w.pid));
  return w;
}

beforeAll(async () => {
  baton = await startTestBaton();
  served = await serveDemoHost(new DemoAgentHost());
  expect((await baton.post('/v1/agents', { id: 'orchestrator', provider: 'manual' })).status).toBe(201);
  for (let i = 0; i < 10; i++) expect((await baton.post('/v1/agents', { id: `agent-${i}`, provider: 'demo' })).status).toBe(201);
  await receiver.start();
  startWorker();
  startWorker();
}, 120_000);

afterAll(async () => {
  await Promise.all([...workers.values()].map((w) => w.stop('SIGKILL')));
  await served?.close();
  await receiver.close();
  // Teardown is best effort.
  await baton?.stop().catch(() => undefined);
});

describe('a subscription across a SIGKILL of its deliverer', () => {
  it('delivers every event of 200 handoffs, in order per handoff, none missing', async () => {
    const created = await baton.post('/v1/subscriptions', { url: receiver.url });
    expect(created.status).toBe(201);
    receiver.secret = created.body.secret as string;
    const subscriptionId = created.body.subscription.id as string;
    const ids: string[] = [];
    for (let i = 0; i < HANDOFFS; i++) {
      const res = await baton.post('/v1/handoffs', { from: 'orchestrator', to: `agent-${i % 10}`, title: `job ${i}`, message: `do ${i}` });
      expect(res.status).toBe(201);
      ids.push(res.body.id as string);
    }
    await eventually(() => expect(receiver.got.length).toBeGreaterThan(HANDOFFS), {
      timeoutMs: SPAWNED_FIRST_TURN_MS,
      what: 'deliveries under way',
    });
    // Between passes nobody holds the lease: wait for one that does, and kill it mid-pass.
    const victim = await eventually(
      async () => {
        const { rows } = await baton.db.pool.query<{ holder: string | null }>(
          `SELECT lease_holder AS holder FROM subscriptions WHERE id = $1 AND lease_until > now()`,
          [subscriptionId],
        );
        const w = workers.get(Number(rows[0]?.holder?.split('-').pop()));
        expect(w, `lease holder ${rows[0]?.holder}`).toBeDefined();
        return w!;
      },
      { timeoutMs: 30_000, intervalMs: 5, what: 'a worker holding the lease' },
    );
    const before = receiver.got.length;
    await victim.stop('SIGKILL');
    startWorker();
    await eventually(
      async () => {
        const { rows: settled } = await baton.db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM handoffs WHERE delivery_state = 'RETURNED' AND work_state = 'returned'`,
        );
        expect(settled[0]!.n).toBe(HANDOFFS);
      },
      { timeoutMs: 120_000, intervalMs: 250, what: 'every handoff returned' },
    );
    const { rows: log } = await baton.db.pool.query<{ id: string; handoffId: string }>(
      `SELECT e.id::text AS id, e.handoff_id AS "handoffId" FROM handoff_events e WHERE e.handoff_id = ANY($1::uuid[]) ORDER BY e.id`,
      [ids],
    );
    await eventually(() => expect(new Set(receiver.got.map((r) => r.eventId)).size).toBe(log.length), {
      timeoutMs: 60_000,
      what: 'every event delivered',
    });
    expect(receiver.refusedSignatures).toEqual([]);
    expect(before).toBeLessThan(log.length);
    for (const r of receiver.got) expect(r.deliveryId).toBe(`${subscriptionId}:${r.eventId}`);
    for (const id of ids) {
      const mine = receiver.got.filter((r) => r.handoffId === id).map((r) => r.eventId);
      expect(mine.filter((e, i) => mine.indexOf(e) === i)).toEqual(log.filter((e) => e.handoffId === id).map((e) => BigInt(e.id)));
    }
  }, 300_000);
});
