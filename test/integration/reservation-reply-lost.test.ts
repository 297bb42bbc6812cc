import type { RedisClient } from '../../libs/queue/open-redis.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import type { ProviderAdapter } from '../../libs/adapters/provider-adapter.ts';
import { createProviderStatusCheck } from '../../libs/adapters/provider-status.ts';
import { systemClock } from '../../libs/domain/clock.ts';
import { openDatabase, type Database } from '../../libs/db/open-database.ts';
import { createRepositories } from '../../libs/db/repositories.ts';
import { openRedis } from '../../libs/queue/open-redis.ts';
import { startDeliveryWorker, type RunningDeliveryWorker } from '../../workers/delivery/start-delivery-worker.ts';
import { TEST_REDIS_URL } from '../support/env.ts';
import { applyTransition } from '../../libs/handoffs/apply-transition.ts';
import type { WorkerHooks } from '../../libs/handoffs/dispatch-deps.ts';
import { SYSTEM_ACTOR } from '../../libs/handoffs/ports.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { eventually } from '../support/eventually.ts';
import { startTcpProxy } from '../support/tcp-proxy.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

// The worker reaches Postgres through a proxy that can lose the reply of one statement after
// it committed; the API (and the test) talk to Postgres directly.
let baton: TestBaton;
let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
let workerDb: Database;
let workerRedis: RedisClient;
let worker: RunningDeliveryWorker;
/** Set by a test to act right before the worker's write. */
const hooks: WorkerHooks = {};

/**
 * How the worker reserves: with the look-up of the head (one statement, HeadReserver: the demo
 * adapter answers "busy" on its write), or apart after asking the session (as for an adapter
 * that does not, such as codex's): the same adapter, told to ask first.
 */
const mode = { reserve: 'with the look-up' as 'with the look-up' | 'apart' };
class Switchable extends AdapterRegistry {
  override get(provider: string): ProviderAdapter | undefined {
    const adapter = super.get(provider);
    return adapter && mode.reserve === 'apart' ? { ...adapter, reportsBusyOnSend: false } : adapter;
  }
}

beforeAll(async () => {
  baton = await startTestBaton();
  const target = new URL(baton.databaseUrl);
  proxy = await startTcpProxy(Number(target.port || 5432), target.hostname);
  const viaProxy = new URL(baton.databaseUrl);
  viaProxy.port = String(proxy.port);
  workerDb = openDatabase({ url: viaProxy.toString(), poolSize: 4, logger: baton.logger, timeouts: { queryMs: 500, connectMs: 500 } });
  workerRedis = openRedis(TEST_REDIS_URL, 'worker', baton.logger);
  const demo = createAdapters(['demo'], { demoHost: baton.host });
  worker = startDeliveryWorker({
    repos: createRepositories(workerDb),
    redis: workerRedis,
    adapters: new Switchable(demo.providers().map((p) => demo.get(p)!)),
    clock: systemClock,
    logger: baton.logger,
    workerId: 'proxied-worker',
    redisPrefix: baton.prefix,
    queueShards: 2,
    concurrency: 4,
    turnLockTtlMs: 3_000,
    jobLockMs: 2_000,
    stalledIntervalMs: 1_000,
    shutdownGraceMs: 2_000,
    busyRetryMs: 100,
    unreachableRetryMs: 200,
    outageRetryMs: 200,
    recheckMs: 100,
    settingsMaxAgeMs: 0,
    outage: createProviderStatusCheck({ cacheMs: 0 }),
    hooks,
  });
  expect((await baton.post('/v1/agents', { id: 'origin', provider: 'demo' })).status).toBe(201);
}, 60_000);

afterAll(async () => {
  proxy?.thaw();
  await worker?.stop();
  await workerRedis?.quit().catch(() => workerRedis.disconnect());
  await workerDb?.close();
  await proxy?.close();
  await baton?.stop();
});

/**
 * An agent, and what marks the worker statement that reserves its first attempt: reserved
 * apart, the session name (the attempt row's target; in no earlier worker statement); reserved
 * with the look-up, the agent's id (the run's first statement).
 */
async function agentWithSession(id: string): Promise<{ session: string; reservation: string }> {
  const session = `session-of-${id}-${Date.now()}`;
  expect((await baton.post('/v1/agents', { id, provider: 'demo', target: session })).status).toBe(201);
  const { rows } = await baton.db.pool.query<{ id: string }>('SELECT id FROM agents WHERE handle = $1 AND removed_at IS NULL', [id]);
  return { session, reservation: mode.reserve === 'apart' ? session : rows[0]!.id };
}

describe.each(['with the look-up', 'apart'] as const)(
  'a worker whose attempt reservation (%s) committed but whose reply was lost',
  (reserve) => {
    beforeAll(() => {
      mode.reserve = reserve;
    });

    it('reads back what committed and sends the reserved attempt: one write, RETURNED, never UNCERTAIN', async () => {
      const { session, reservation } = await agentWithSession(`lostreply-${reserve.length}`);
      const cut = proxy.cutAfterReply(reservation);
      const sent = await baton.post('/v1/handoffs', {
        from: 'origin',
        to: `lostreply-${reserve.length}`,
        message: 'reserve, lose the reply',
        title: 'lost reservation reply',
      });
      expect(sent.status).toBe(201);
      await cut;
      const h = await waitForState(baton, sent.body.id, 'RETURNED');
      const events = h.events.filter((e: any) => e.workTo === null).map((e: any) => e.event);
      expect(events).not.toContain('reply_lost');
      expect(events.filter((e: string) => e === 'attempt_reserved')).toHaveLength(1);
      expect(h.attempts).toHaveLength(1);
      expect(baton.host.writesByHandoff().get(sent.body.id)).toHaveLength(1);
      expect(baton.host.history(session)[0]?.requestId).toBe(h.attempts[0].requestId);
    });

    it('while Postgres stays away after the lost reply, keeps reading back under its turn lock and sends once Postgres answers', async () => {
      const { reservation } = await agentWithSession(`frozenafter-${reserve.length}`);
      const cut = proxy.cutAfterReply(reservation);
      const sent = await baton.post('/v1/handoffs', {
        from: 'origin',
        to: `frozenafter-${reserve.length}`,
        message: 'reserve, then Postgres freezes',
        title: 'frozen after reservation',
      });
      expect(sent.status).toBe(201);
      await cut;
      proxy.freeze();
      // Read-backs go unanswered (each on a new connection, after the last one timed out);
      // meanwhile nothing is written to the session.
      const before = proxy.accepted;
      await eventually(() => expect(proxy.accepted).toBeGreaterThanOrEqual(before + 2), { what: 'two read-back attempts while frozen' });
      expect(baton.host.writesByHandoff().get(sent.body.id)).toBeUndefined();
      proxy.thaw();
      const h = await waitForState(baton, sent.body.id, 'RETURNED');
      expect(h.events.map((e: any) => e.event)).not.toContain('reply_lost');
      expect(h.attempts).toHaveLength(1);
      expect(baton.host.writesByHandoff().get(sent.body.id)).toHaveLength(1);
    });
  },
);

describe('a worker whose reservation rode on the end of the previous turn, and whose reply was lost', () => {
  beforeAll(() => {
    mode.reserve = 'with the look-up';
  });

  it('reads back what committed (the end and the next reservation, all or nothing) and sends the next turn once: both RETURNED, never UNCERTAIN', async () => {
    const handle = 'lostend';
    const session = `session-of-${handle}-${Date.now()}`;
    // A turn long enough for the second handoff to queue behind it (BUSY), so the statement that
    // records the first turn's end also reserves the second's attempt.
    expect((await baton.post('/v1/agents', { id: handle, provider: 'demo', target: session, settings: { thinkMs: 400 } })).status).toBe(
      201,
    );
    // The first statement of the worker that records a returned turn is the first turn's end.
    const cut = proxy.cutAfterReply('turn_returned');
    const first = await baton.post('/v1/handoffs', {
      from: 'origin',
      to: handle,
      message: 'first, whose end loses its reply',
      title: 'lost end reply 1',
    });
    const second = await baton.post('/v1/handoffs', {
      from: 'origin',
      to: handle,
      message: 'second, reserved with that end',
      title: 'lost end reply 2',
    });
    expect([first.status, second.status]).toEqual([201, 201]);
    await cut;
    for (const sent of [first, second]) {
      const h = await waitForState(baton, sent.body.id, 'RETURNED');
      const events = h.events.map((e: any) => e.event);
      expect(events).not.toContain('reply_lost');
      expect(events.filter((e: string) => e === 'attempt_reserved')).toHaveLength(1);
      expect(h.attempts).toHaveLength(1);
      expect(baton.host.writesByHandoff().get(sent.body.id)).toHaveLength(1);
    }
    expect(baton.host.history(session).map((t: any) => t.handoffId)).toEqual([first.body.id, second.body.id]);
  });
});

describe.each(['with the look-up', 'apart'] as const)(
  'a worker that lost its lock before the write (reserved %s), while Postgres is away',
  (reserve) => {
    beforeAll(() => {
      mode.reserve = reserve;
    });

    it('still proves the attempt unsent once Postgres answers (a new holder marked it UNCERTAIN): sent again, RETURNED, one write, never CANCELLED', async () => {
      const handle = `proofblip-${reserve.length}`;
      await agentWithSession(handle);
      const { rows } = await baton.db.pool.query<{ id: string }>('SELECT id FROM agents WHERE handle = $1 AND removed_at IS NULL', [
        handle,
      ]);
      const agentId = rows[0]!.id;
      hooks.beforeWrite = async (agent) => {
        if (agent !== agentId) return;
        hooks.beforeWrite = undefined;
        // A new holder takes the lock and marks the reserved attempt UNCERTAIN (straight to
        // Postgres, not through the worker's proxy) ...
        await baton.redis.set(new RedisNames(baton.prefix).turnLock(agentId), 'new-holder', 'PX', 300);
        const h = (
          await baton.db.pool.query<{ id: string; revision: number; attempt_count: number }>(
            "SELECT id, revision, attempt_count FROM handoffs WHERE recipient_id = $1 AND delivery_state = 'SENDING'",
            [agentId],
          )
        ).rows[0]!;
        await applyTransition(
          baton.core,
          {
            id: h.id,
            deliveryState: 'SENDING',
            revision: h.revision,
            attemptCount: h.attempt_count,
            refusals: 0,
            errorResends: 0,
            interruptResends: 0,
          },
          'reply_lost',
          { ...SYSTEM_ACTOR, id: 'new-holder' },
          { reason: 'the worker that was writing this turn stopped before recording the outcome' },
        );
        // ... and the reserving worker's Postgres goes away for a while, as the same fault often does.
        await proxy.cut();
        setTimeout(() => void proxy.restore(), 800);
      };
      const sent = await baton.post('/v1/handoffs', {
        from: 'origin',
        to: handle,
        message: 'lose the lock, then Postgres',
        title: 'proof through a blip',
      });
      expect(sent.status).toBe(201);
      // Proven unsent, sent again and returned.
      const h = await waitForState(baton, sent.body.id, 'RETURNED', 20_000);
      expect(h.events.map((e: any) => e.event)).toEqual(expect.arrayContaining(['reply_lost', 'unsent_proven']));
      expect(h.attempts.map((a: any) => a.status)).toEqual(['not_sent', 'returned']);
      expect(baton.host.writesByHandoff().get(sent.body.id)).toEqual([h.attempts[1].requestId]);
    });
  },
);
