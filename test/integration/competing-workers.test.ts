import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DemoAgentHost, findWriteViolations } from '../../libs/adapters/demo/demo-agent-host.ts';
import { serveDemoHost } from '../../libs/adapters/demo/demo-host-server.ts';
import { REDIS_TARGETS } from '../support/redis-targets.ts';
import { eventually } from '../support/eventually.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

describe.each(REDIS_TARGETS)('on a $name', ({ url }) => {
  let baton: TestBaton;
  let sessions: DemoAgentHost;
  let served: Awaited<ReturnType<typeof serveDemoHost>>;
  const workers: BatonProcess[] = [];

  beforeAll(async () => {
    baton = await startTestBaton({ redisUrl: url });
    // The simulated sessions live here; both worker processes write to them over HTTP.
    sessions = new DemoAgentHost();
    served = await serveDemoHost(sessions);
    for (const id of ['boss', 'solo']) {
      expect((await baton.post('/v1/agents', { id, provider: 'demo', settings: { thinkMs: 40 } })).status).toBe(201);
    }
    for (const n of [1, 2]) {
      const w = spawnBaton(['worker'], {
        DATABASE_URL: baton.databaseUrl,
        REDIS_URL: url,
        BATON_REDIS_PREFIX: baton.prefix,
        BATON_QUEUE_SHARDS: '2',
        BATON_DEMO_HOST_URL: served.url,
        BATON_LOG_LEVEL: 'info',
        BATON_TURN_LOCK_TTL_MS: '2000',
        BATON_RECONCILE_INTERVAL_MS: '500',
      });
      workers.push(w);
      await w.waitFor(/delivery worker started/);
      void n;
    }
  }, 60_000);

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await served?.close();
    await baton?.stop();
  });

  describe('two worker processes competing for one agent', () => {
    it('deliver ten handoffs one at a time, in send order, each exactly once', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 10; i++) {
        const res = await baton.post('/v1/handoffs', { from: 'boss', to: 'solo', title: `task ${i}`, message: `task ${i}` });
        expect(res.status).toBe(201);
        ids.push(res.body.id);
      }
      await eventually(
        async () => {
          const { rows } = await baton.db.pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM handoffs WHERE delivery_state = 'RETURNED'`,
          );
          expect(rows[0]!.n).toBe(10);
        },
        { timeoutMs: 20_000, what: 'all ten RETURNED' },
      );

      const turns = sessions.history('solo');
      // Exactly one write per handoff, in the order they were sent.
      expect(turns.map((t) => t.handoffId)).toEqual(ids);
      // Never two turns at once: no write (not even one the session refused as busy) arrived
      // while another turn was live, and no request id was written twice.
      expect(findWriteViolations(sessions.writes('solo'))).toEqual([]);
      expect(sessions.stats().find((s) => s.session === 'solo')).toMatchObject({ turnsReceived: 10, overlapAttempts: 0 });

      // Handoffs sent while a turn was live waited, visibly, as BUSY.
      const { rows: busy } = await baton.db.pool.query<{ n: number }>(
        `SELECT count(DISTINCT handoff_id)::int AS n FROM handoff_events WHERE to_state = 'BUSY'`,
      );
      expect(busy[0]!.n).toBeGreaterThan(0);
    });

    it('stop gracefully on SIGTERM', async () => {
      const codes = await Promise.all(workers.map((w) => w.stop('SIGTERM')));
      expect(codes).toEqual([0, 0]);
      for (const w of workers) expect(w.output()).toMatch(/delivery worker stopped/);
    });
  });
});
