import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DemoAgentHost } from '../../libs/adapters/demo/demo-agent-host.ts';
import { serveDemoHost } from '../../libs/adapters/demo/demo-host-server.ts';
import { TEST_REDIS_URL } from '../support/env.ts';
import { eventually } from '../support/eventually.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

let baton: TestBaton;
let sessions: DemoAgentHost;
let served: Awaited<ReturnType<typeof serveDemoHost>>;
const workers: BatonProcess[] = [];

function startWorker(): BatonProcess {
  const w = spawnBaton(['worker'], {
    DATABASE_URL: baton.databaseUrl,
    REDIS_URL: TEST_REDIS_URL,
    BATON_REDIS_PREFIX: baton.prefix,
    BATON_QUEUE_SHARDS: '2',
    BATON_DEMO_HOST_URL: served.url,
    BATON_LOG_LEVEL: 'info',
  });
  workers.push(w);
  return w;
}

const state = async (id: string) => (await baton.get(`/v1/handoffs/${id}`)).body;
/** A process start on a loaded two-core host can take this long: what is measured starts after it. */
const START_MS = 60_000;

beforeAll(async () => {
  baton = await startTestBaton();
  sessions = new DemoAgentHost();
  served = await serveDemoHost(sessions);
  await baton.post('/v1/agents', { id: 'boss', provider: 'demo' });
  // Answers the writer 8 s late: a worker killed in that window has reserved and written.
  await baton.post('/v1/agents', { id: 'slow', provider: 'demo', settings: { replyDelayMs: 8_000, thinkMs: 50 } });
  await baton.post('/v1/agents', { id: 'cold', provider: 'demo' });
}, 60_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await served?.close();
  await baton?.stop();
});

describe('a worker killed at a precise point', () => {
  it(
    'after reserving the attempt (the write landed): UNCERTAIN within seconds, then found in history, never written again',
    async () => {
      const first = startWorker();
      await first.waitFor(/delivery worker started/, START_MS);
      const sent = await baton.post('/v1/handoffs', { from: 'boss', to: 'slow', message: 'mid-write', title: 'mid-write' });
      await eventually(async () => {
        expect((await state(sent.body.id)).state).toBe('SENDING');
        expect(sessions.history('slow')).toHaveLength(1);
      });
      first.child.kill('SIGKILL');
      await first.exited();
      const killedAt = Date.now();
      const second = startWorker();
      await second.waitFor(/delivery worker started/, START_MS);
      const uncertain = await eventually(
        async () => {
          const h = await state(sent.body.id);
          expect(h.events.map((e: any) => e.event)).toContain('reply_lost');
          return h;
        },
        { timeoutMs: 15_000, what: 'SENDING to UNCERTAIN after the kill' },
      );
      const recoveredMs = Date.parse(uncertain.events.find((e: any) => e.event === 'reply_lost').at) - killedAt;
      const done = await eventually(
        async () => {
          const h = await state(sent.body.id);
          expect(h.state).toBe('RETURNED');
          return h;
        },
        { timeoutMs: 15_000 },
      );
      // (A BUSY step may come first when two of the worker's jobs raced for the agent's lock.)
      const events = done.events.map((e: any) => e.event).filter((e: string) => e !== 'recipient_busy');
      expect(events.slice(0, 3)).toEqual(['enrolled', 'attempt_reserved', 'reply_lost']);
      expect(events[3], JSON.stringify(done.events.map((e: any) => [e.event, e.from, e.to, e.actor.kind]))).toMatch(
        /^observed_(running|returned)$/,
      );
      expect(events.filter((e: string) => e === 'attempt_reserved')).toHaveLength(1);
      expect(sessions.writesByHandoff().get(sent.body.id)).toHaveLength(1);
      console.info(`kill after reserve: UNCERTAIN ${recoveredMs} ms after SIGKILL`);
    },
    60_000 + 2 * START_MS,
  );

  it(
    'before any job ran (its job lost with Redis): the reconciler queues it from Postgres and it goes out exactly once',
    async () => {
      await Promise.all(workers.map((w) => w.stop('SIGTERM')));
      const sent = await baton.post('/v1/handoffs', { from: 'boss', to: 'cold', message: 'orphan', title: 'orphan' });
      expect(sent.status).toBe(201);
      // Drop every queued job, as a wipe would.
      const keys = await baton.redis.keys(`${baton.prefix}:*`);
      if (keys.length > 0) await baton.redis.del(...keys);
      await startWorker().waitFor(/delivery worker started/, START_MS);
      // The reconciler's first sweep (BATON_RECONCILE_INTERVAL_MS, 1 s by default) queues it: then one turn.
      await eventually(async () => expect((await state(sent.body.id)).state).toBe('RETURNED'), { timeoutMs: 15_000 });
      expect(sessions.writesByHandoff().get(sent.body.id)).toHaveLength(1);
    },
    30_000 + START_MS,
  );
});
