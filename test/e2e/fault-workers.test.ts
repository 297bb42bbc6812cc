import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_EVENT_PUBLISHER } from '../../libs/handoffs/ports.ts';
import { Redis } from 'ioredis';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { DemoAgentHost, findWriteViolations } from '../../libs/adapters/demo/demo-agent-host.ts';
import { DemoHostClient } from '../../libs/adapters/demo/demo-host-client.ts';
import { serveDemoHost } from '../../libs/adapters/demo/demo-host-server.ts';
import { ManualClock } from '../../libs/domain/clock.ts';
import { DEFAULT_DELIVERY_WINDOWS } from '../../libs/domain/delivery-policy.ts';
import { SETTLED_STATES } from '../../libs/domain/delivery-states.ts';
import { reconcileUncertain } from '../../libs/handoffs/reconcile-uncertain.ts';
import { startPrivateRedis } from '../../libs/processes/embedded-infra.ts';
import { eventually } from '../support/eventually.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * Chaos, bounded: three worker processes on a private Redis deliver 200 handoffs to 20
 * simulated agents while the test SIGKILLs a random worker every ~300 ms (starting a new one
 * each time), wipes Redis with FLUSHALL at one point and restarts it at another. Then every
 * handoff must be final, no request id written twice, no handoff written twice, and no
 * session ever written to while another of its turns was live. The last two are read from the
 * demo host's write log, which keeps every write attempt, also those it answered busy (its
 * turn history never holds an overlapping write: the session refuses it).
 */

const HANDOFFS = 200;
const AGENTS = 20;

let baton: TestBaton;
let redis: Awaited<ReturnType<typeof startPrivateRedis>>;
let redisPort: number;
let sessions: DemoAgentHost;
let served: Awaited<ReturnType<typeof serveDemoHost>>;
const workers = new Set<BatonProcess>();
let spawned = 0;

function startWorker(): BatonProcess {
  const w = spawnBaton(['worker'], {
    DATABASE_URL: baton.databaseUrl,
    REDIS_URL: redis.url,
    BATON_REDIS_PREFIX: baton.prefix,
    BATON_QUEUE_SHARDS: '2',
    BATON_DEMO_HOST_URL: served.url,
    BATON_LOG_LEVEL: 'warn',
    BATON_TURN_LOCK_TTL_MS: '1500',
    BATON_JOB_LOCK_MS: '1500',
    BATON_STALLED_INTERVAL_MS: '500',
    BATON_RECONCILE_INTERVAL_MS: '500',
    BATON_SHUTDOWN_GRACE_MS: '1000',
  });
  spawned++;
  workers.add(w);
  void w.exited().then(() => workers.delete(w));
  return w;
}

async function counts(): Promise<Record<string, number>> {
  const { rows } = await baton.db.pool.query<{ state: string; n: number }>(
    'SELECT delivery_state AS state, count(*)::int AS n FROM handoffs GROUP BY 1',
  );
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

beforeAll(async () => {
  redis = await startPrivateRedis();
  redisPort = Number(new URL(redis.url).port);
  baton = await startTestBaton({ redisUrl: redis.url });
  sessions = new DemoAgentHost();
  served = await serveDemoHost(sessions);
  expect((await baton.post('/v1/agents', { id: 'dispatcher', provider: 'demo' })).status).toBe(201);
  for (let i = 0; i < AGENTS; i++) {
    expect((await baton.post('/v1/agents', { id: `agent-${i}`, provider: 'demo', settings: { thinkMs: 5 + ((i * 7) % 30) } })).status).toBe(
      201,
    );
  }
  for (let i = 0; i < 3; i++) startWorker();
}, 120_000);

afterAll(async () => {
  await Promise.all([...workers].map((w) => w.stop('SIGKILL')));
  await served?.close();
  // Teardown is best effort.
  await baton?.stop().catch(() => undefined);
  await redis?.stop();
});

describe('workers killed at random, Redis wiped and restarted, mid-run', () => {
  it('every handoff ends final, none is written twice, and no session is written to during another of its turns', async () => {
    let stopChaos = false;
    let kills = 0;
    const chaos = (async () => {
      while (!stopChaos) {
        await new Promise((r) => setTimeout(r, 200 + Math.floor(Math.random() * 200)));
        const alive = [...workers];
        const victim = alive[Math.floor(Math.random() * alive.length)];
        if (victim) {
          victim.child.kill('SIGKILL');
          kills++;
        }
        startWorker();
      }
    })();

    const ids: string[] = [];
    const admin = new Redis(redis.url, { maxRetriesPerRequest: null });
    for (let i = 0; i < HANDOFFS; i++) {
      const res = await baton.post('/v1/handoffs', {
        from: 'dispatcher',
        to: `agent-${i % AGENTS}`,
        message: `task ${i}`,
        title: `task ${i}`,
      });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
      if (i === 70) await admin.flushall();
      if (i === 140) {
        // Restart Redis on the same port (nothing kept on disk: a second wipe, and a reconnect).
        admin.disconnect();
        await redis.stop();
        redis = await startPrivateRedis({ port: redisPort });
      }
      if (i % 10 === 0) await new Promise((r) => setTimeout(r, 20));
    }
    // Keep killing while the last sends are being delivered: three more kills after the last send.
    const killsAtLastSend = kills;
    await eventually(async () => expect(kills).toBeGreaterThanOrEqual(killsAtLastSend + 3), {
      timeoutMs: 10_000,
      what: 'three kills after the last send',
    });
    stopChaos = true;
    await chaos;
    expect(kills).toBeGreaterThan(5);

    // Everything settles, or is UNCERTAIN (a write cut off by a kill): never stuck elsewhere.
    await eventually(
      async () => {
        const c = await counts();
        const stuck = Object.entries(c).filter(([s]) => !SETTLED_STATES.has(s as never) && s !== 'UNCERTAIN');
        expect(stuck).toEqual([]);
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'all handoffs final or UNCERTAIN' },
    );

    // Reconcile UNCERTAIN deliveries by observation, an hour passing on an injected clock.
    const clock = new ManualClock(Date.now());
    const demoClient = new DemoHostClient(served.url);
    const deps = {
      ...baton.repos,
      deployment: baton.core.deployment,
      adapters: createAdapters(['demo'], { demoHost: demoClient }),
      scheduler: { enqueue: async () => undefined },
      events: NO_EVENT_PUBLISHER,
      clock,
      logger: baton.logger,
      workerId: 'fault-test-reconciler',
      windows: DEFAULT_DELIVERY_WINDOWS,
    };
    for (let pass = 0; pass < 4; pass++) {
      await reconcileUncertain(deps);
      clock.advance(31 * 60_000);
    }
    await eventually(
      async () => {
        const c = await counts();
        expect(Object.keys(c).filter((s) => !SETTLED_STATES.has(s as never))).toEqual([]);
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'all handoffs settled' },
    );

    const final = await counts();
    const writes = sessions.writesByHandoff();
    const { rows } = await baton.db.pool.query<{ id: string; state: string; attempts: number }>(
      'SELECT id, delivery_state AS state, attempt_count AS attempts FROM handoffs WHERE id = ANY($1::uuid[])',
      [ids],
    );
    expect(rows).toHaveLength(HANDOFFS);
    for (const r of rows) {
      const n = writes.get(r.id)?.length ?? 0;
      expect(n, `writes for ${r.id} (${r.state})`).toBeLessThanOrEqual(1);
      if (r.state === 'RETURNED') expect(n, `RETURNED ${r.id} landed once`).toBe(1);
      if (r.state === 'CANCELLED') expect(n, `CANCELLED ${r.id} never landed`).toBe(0);
      expect(['RETURNED', 'CANCELLED']).toContain(r.state);
    }
    // Read over HTTP, as the workers wrote: every write attempt, whatever the session answered.
    const log = await demoClient.writes();
    demoClient.close();
    const landed = [...writes.values()].reduce((a, w) => a + w.length, 0);
    expect(
      log.filter((w) => w.answer === 'accepted'),
      'the write log holds every turn that landed',
    ).toHaveLength(landed);
    expect(findWriteViolations(log), 'no write during another turn of the session, no request id written twice').toEqual([]);
    console.info(
      `fault run: ${spawned} worker processes started, ${kills} SIGKILLed, final states ${JSON.stringify(final)}, ${log.length} writes (${landed} landed)`,
    );
  }, 240_000);
});
