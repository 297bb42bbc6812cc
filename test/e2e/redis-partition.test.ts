import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DemoAgentHost, findWriteViolations } from '../../libs/adapters/demo/demo-agent-host.ts';
import { serveDemoHost } from '../../libs/adapters/demo/demo-host-server.ts';
import { startPrivateRedis } from '../../libs/processes/embedded-infra.ts';
import { eventually } from '../support/eventually.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTcpProxy } from '../support/tcp-proxy.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * The fenced turn lock under a partition: two worker processes deliver to simulated sessions
 * that take long turns; one of them reaches Redis through a TCP proxy that the test freezes
 * (connections stay open, nothing is forwarded: the holder gets no answer and no error) for
 * longer than the lock's lifetime, three times in the middle of the run. The other worker takes
 * the locks over. No session may ever receive a write while another of its turns is live, and
 * no request id may be written twice; every handoff ends RETURNED, having landed once.
 */

const AGENTS = 6;
const HANDOFFS = 36;
const LOCK_TTL_MS = 900;

let baton: TestBaton;
let redis: Awaited<ReturnType<typeof startPrivateRedis>>;
let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
let sessions: DemoAgentHost;
let served: Awaited<ReturnType<typeof serveDemoHost>>;
const workers: BatonProcess[] = [];

function startWorker(redisUrl: string): BatonProcess {
  const w = spawnBaton(['worker'], {
    DATABASE_URL: baton.databaseUrl,
    REDIS_URL: redisUrl,
    BATON_REDIS_PREFIX: baton.prefix,
    BATON_QUEUE_SHARDS: '2',
    BATON_DEMO_HOST_URL: served.url,
    BATON_LOG_LEVEL: 'warn',
    BATON_TURN_LOCK_TTL_MS: String(LOCK_TTL_MS),
    BATON_JOB_LOCK_MS: '900',
    BATON_STALLED_INTERVAL_MS: '300',
    BATON_RECONCILE_INTERVAL_MS: '300',
    BATON_SHUTDOWN_GRACE_MS: '500',
  });
  workers.push(w);
  return w;
}

beforeAll(async () => {
  redis = await startPrivateRedis();
  proxy = await startTcpProxy(Number(new URL(redis.url).port));
  baton = await startTestBaton({ redisUrl: redis.url });
  sessions = new DemoAgentHost();
  served = await serveDemoHost(sessions);
  expect((await baton.post('/v1/agents', { id: 'dispatcher', provider: 'manual' })).status).toBe(201);
  for (let i = 0; i < AGENTS; i++) {
    expect(
      (await baton.post('/v1/agents', { id: `agent-${i}`, provider: 'demo', settings: { thinkMs: 250 + ((i * 97) % 400) } })).status,
    ).toBe(201);
  }
  // The worker behind the proxy starts alone, so it holds the first turns when the first
  // partition comes; the direct worker starts right then.
  startWorker(`redis://127.0.0.1:${proxy.port}`);
}, 60_000);

afterAll(async () => {
  proxy?.thaw();
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await served?.close();
  // Teardown is best effort.
  await baton?.stop().catch(() => undefined);
  await proxy?.close();
  await redis?.stop();
});

describe('a worker partitioned from Redis in the middle of a run', () => {
  it('loses its locks within their lifetime and writes nothing after: no two turns at once, no request id twice', async () => {
    const ids: string[] = [];
    for (let i = 0; i < HANDOFFS; i++) {
      const res = await baton.post('/v1/handoffs', {
        from: 'dispatcher',
        to: `agent-${i % AGENTS}`,
        title: `task ${i}`,
        message: `task ${i}`,
      });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
    }
    const returned = async () => {
      const { rows } = await baton.db.pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM handoffs WHERE delivery_state = 'RETURNED'",
      );
      return rows[0]!.n;
    };
    const live = async () => {
      const { rows } = await baton.db.pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM handoffs WHERE delivery_state IN ('ACCEPTED', 'RUNNING')",
      );
      return rows[0]!.n;
    };
    // The first partition cuts off the only worker while its turns are live; the direct worker
    // takes over. Two more partitions follow mid-run, each longer than the lock's lifetime.
    await eventually(async () => (await returned()) >= 2 && (await live()) >= 2, {
      timeoutMs: 60_000,
      what: 'turns live on the proxied worker',
    });
    proxy.freeze();
    startWorker(redis.url);
    await new Promise((r) => setTimeout(r, LOCK_TTL_MS * 3));
    proxy.thaw();
    for (const after of [14, 24]) {
      await eventually(async () => (await returned()) >= after, { timeoutMs: 60_000, what: `${after} turns returned` });
      proxy.freeze();
      await new Promise((r) => setTimeout(r, LOCK_TTL_MS * 3));
      proxy.thaw();
    }
    await eventually(async () => expect(await returned()).toBe(HANDOFFS), {
      timeoutMs: 90_000,
      intervalMs: 250,
      what: 'every handoff RETURNED',
    });

    const log = sessions.writes();
    expect(findWriteViolations(log), 'no write while another turn of the session was live, no request id twice').toEqual([]);
    const landed = sessions.writesByHandoff();
    for (const id of ids) expect(landed.get(id)?.length, `handoff ${id} landed exactly once`).toBe(1);
    // The partition did cut a holder off: the proxied worker said it lost a lock.
    const partitioned = workers[0]!.output();
    expect(partitioned).toMatch(/turn lock lost|could not prove turn lock ownership/);
  }, 180_000);
});
