import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyTransition } from '../../libs/handoffs/apply-transition.ts';
import type { WorkerHooks } from '../../libs/handoffs/dispatch-deps.ts';
import { SYSTEM_ACTOR } from '../../libs/handoffs/ports.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * A worker reserves an attempt, then loses its turn lock (Redis wiped, a partition) before the
 * write; a new lock holder finds the attempt SENDING and, not knowing whether it was written,
 * marks it UNCERTAIN. The reserving worker knows it never wrote it: it proves that, so the
 * handoff is sent again at once instead of waiting an hour of history scans.
 */
let baton: TestBaton;

beforeAll(async () => {
  baton = await startTestBaton();
  expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'dev', provider: 'demo', settings: { thinkMs: 20 } })).status).toBe(201);
});

afterAll(async () => {
  await baton?.stop();
});

describe('a lock taken over between the reservation and the write', () => {
  it('is settled by the reserving worker (unsent_proven), sent again, and lands exactly once', async () => {
    const worker = baton.startWorker({ hooks: await takeOverBeforeWrite() });
    const sent = await baton.post('/v1/handoffs', { from: 'lead', to: 'dev', title: 'taken over', message: 'do it' });
    await expectSentAgainOnce(sent.body.id, ['reply_lost', 'unsent_proven']);
    await worker.stop();
  });

  it('is sent again at once even when a history scan marked the attempt missing first (its next-scan time is dropped)', async () => {
    let scanned: string[] = [];
    // The reconciler scans the history before the reserving worker proves it never wrote: not
    // found, next scan in twenty minutes.
    const hooks = await takeOverBeforeWrite(async (handoffId) => {
      await baton.reconcile();
      const after = await baton.db.pool.query<{ not_before: Date | null; delivery_state: string }>(
        'SELECT not_before, delivery_state FROM handoffs WHERE id = $1',
        [handoffId],
      );
      scanned = [after.rows[0]!.delivery_state, after.rows[0]!.not_before === null ? 'now' : 'later'];
    });
    const worker = baton.startWorker({ hooks });
    const sent = await baton.post('/v1/handoffs', { from: 'lead', to: 'dev', title: 'scanned, then proven', message: 'do it' });
    await expectSentAgainOnce(sent.body.id, ['reply_lost', 'scan_missed', 'unsent_proven']);
    expect(scanned).toEqual(['UNCERTAIN', 'later']);
    await worker.stop();
  });
});

/**
 * Hooks for one worker: right before its first write to `dev`, a new holder takes the turn lock
 * and marks the SENDING attempt UNCERTAIN; then `meanwhile` runs.
 */
async function takeOverBeforeWrite(meanwhile?: (handoffId: string) => Promise<void>): Promise<WorkerHooks> {
  const { rows } = await baton.db.pool.query<{ id: string }>("SELECT id FROM agents WHERE handle = 'dev' AND removed_at IS NULL");
  const agentId = rows[0]!.id;
  const hooks: WorkerHooks = {
    beforeWrite: async (agent) => {
      if (agent !== agentId) return;
      hooks.beforeWrite = undefined;
      await baton.redis.set(new RedisNames(baton.prefix).turnLock(agentId), 'new-holder', 'PX', 300);
      const h = (
        await baton.db.pool.query<{ id: string; revision: number; attempt_count: number }>(
          "SELECT id, revision, attempt_count FROM handoffs WHERE delivery_state = 'SENDING'",
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
      await meanwhile?.(h.id);
    },
  };
  return hooks;
}

/** The handoff ends RETURNED, its first attempt proven never written and its second written once. */
async function expectSentAgainOnce(id: string, expectedEvents: string[]): Promise<void> {
  const h = await eventually(
    async () => {
      await baton.reconcile();
      const now = (await baton.get(`/v1/handoffs/${id}`)).body;
      expect(now.state).toBe('RETURNED');
      return now;
    },
    { what: 'sent again and returned', timeoutMs: 15_000 },
  );
  const events = h.events.map((e: any) => e.event);
  expect(events).toEqual(expect.arrayContaining(expectedEvents));
  expect(h.attempts.map((a: any) => a.status)).toEqual(['not_sent', 'returned']);
  // The first attempt never reached the session; the second did, once.
  expect(baton.host.writesByHandoff().get(id)).toEqual([h.attempts[1].requestId]);
}
