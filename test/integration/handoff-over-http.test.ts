import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyTransition } from '../../libs/handoffs/apply-transition.ts';
import { SYSTEM_ACTOR } from '../../libs/handoffs/ports.ts';
import { getHandoff, type HandoffDetailReads } from '../../libs/handoffs/query-handoffs.ts';
import { EVERYONE } from '../../libs/domain/visibility.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

let baton: TestBaton;

async function counts() {
  const { rows } = await baton.db.pool.query<{ h: number; e: number; a: number }>(
    `SELECT (SELECT count(*) FROM handoffs)::int AS h, (SELECT count(*) FROM handoff_events)::int AS e, (SELECT count(*) FROM delivery_attempts)::int AS a`,
  );
  return rows[0];
}

beforeAll(async () => {
  baton = await startTestBaton();
  for (const id of ['planner', 'engineer', 'reviewer']) {
    const res = await baton.post('/v1/agents', { id, provider: 'demo', displayName: id[0]!.toUpperCase() + id.slice(1) });
    expect(res.status).toBe(201);
  }
  baton.startWorker();
});

afterAll(async () => {
  await baton?.stop();
});

describe('a handoff sent over HTTP', () => {
  it('reaches RETURNED with a complete, ordered event log and exactly one write', async () => {
    const sent = await baton.post('/v1/handoffs', {
      from: 'planner',
      to: 'engineer',
      title: 'Implement login',
      message: 'Add a login form',
      context: { summary: 'auth epic', openQuestions: ['OAuth?'], nextSteps: ['write tests'] },
    });
    expect(sent.status).toBe(201);
    expect(sent.body).toMatchObject({ from: 'planner', to: 'engineer', state: 'WAITING', deliveryState: 'WAITING', revision: 0 });

    const done = await eventually(
      async () => {
        const res = await baton.get(`/v1/handoffs/${sent.body.id}`);
        expect(res.body.state).toBe('RETURNED');
        return res.body;
      },
      { what: 'handoff RETURNED' },
    );

    const deliveryEvents = done.events.filter((e: any) => e.workTo === null);
    expect(deliveryEvents.map((e: any) => [e.from, e.to, e.event])).toEqual([
      [null, 'WAITING', 'enrolled'],
      ['WAITING', 'SENDING', 'attempt_reserved'],
      ['SENDING', 'ACCEPTED', 'turn_accepted'],
      ['ACCEPTED', 'RUNNING', 'turn_started'],
      ['RUNNING', 'RETURNED', 'turn_returned'],
    ]);
    expect(deliveryEvents.map((e: any) => e.revision)).toEqual([0, 1, 2, 3, 4]);
    // The work the turn was about is returned with the turn's result, in the same write.
    expect(done.events.filter((e: any) => e.workTo !== null).map((e: any) => [e.workFrom, e.workTo, e.event])).toEqual([
      ['open', 'returned', 'returned'],
    ]);
    expect(done.workState).toBe('returned');
    const times = done.events.map((e: any) => Date.parse(e.at));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    // Who sent it, and with which token (the test's admin token, acting as planner).
    const admin = (await baton.get('/v1/whoami')).body.tokenId;
    expect(done.events[0].actor).toEqual({ kind: 'sender', id: 'planner', tokenId: admin });
    expect(done.events.slice(1).every((e: any) => e.actor.kind === 'system')).toBe(true);
    expect(done.attempts).toHaveLength(1);
    expect(done.attempts[0]).toMatchObject({ number: 1, status: 'returned' });
    expect(done.result.summary).toContain('Implement login');
    expect(done.settledAt).not.toBeNull();

    const writes = baton.host.writesByHandoff().get(sent.body.id);
    expect(writes).toEqual([done.attempts[0].requestId]);
  });

  it('returns the first handoff, not a new one, when the sender repeats an idempotency key', async () => {
    const body = { from: 'planner', to: 'reviewer', message: 'review it', idempotencyKey: 'review-1' };
    const first = await baton.post('/v1/handoffs', body);
    const again = await baton.post('/v1/handoffs', body);
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    const viaHeader = await baton.post('/v1/handoffs', { ...body, idempotencyKey: undefined }, { 'idempotency-key': 'review-1' });
    expect(viaHeader.body.id).toBe(first.body.id);
  });

  it('refuses a used idempotency key with different content (409 idempotency_conflict) and creates nothing', async () => {
    const first = await baton.post('/v1/handoffs', { from: 'planner', to: 'reviewer', message: 'review A', idempotencyKey: 'conflict-1' });
    expect(first.status).toBe(201);
    const other = await baton.post('/v1/handoffs', { from: 'planner', to: 'reviewer', message: 'review B', idempotencyKey: 'conflict-1' });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('idempotency_conflict');
    const { rows } = await baton.db.pool.query(`SELECT count(*)::int AS n FROM handoffs WHERE idempotency_key = 'conflict-1'`);
    expect(rows[0].n).toBe(1);
  });
});

describe('reading one handoff', () => {
  it('shows its state and its timeline from one snapshot, even when a move commits between the reads', async () => {
    expect((await baton.post('/v1/agents', { id: 'pull-only', provider: 'manual' })).status).toBe(201);
    const sent = await baton.post('/v1/handoffs', { from: 'planner', to: 'pull-only', message: 'read me while I move' });
    const id = sent.body.id as string;
    const before = (await baton.repos.handoffs.findById(id))!;
    // Right before the timeline is read, a move commits on another connection.
    let moved = false;
    const moveFirst = (inner: HandoffDetailReads): HandoffDetailReads => ({
      findView: (projectId, handoffId) => inner.findView(projectId, handoffId),
      attempts: (handoffId) => inner.attempts(handoffId),
      notificationsFor: (handoffId) => inner.notificationsFor(handoffId),
      events: async (handoffId) => {
        if (!moved) {
          moved = true;
          await applyTransition(baton.core, before, 'held', SYSTEM_ACTOR, { reason: 'moved between the reads' });
        }
        return inner.events(handoffId);
      },
    });
    const handoffs = {
      snapshot: <T>(read: (reads: HandoffDetailReads) => Promise<T>) => baton.core.handoffs.snapshot((inner) => read(moveFirst(inner))),
    };
    const detail = await getHandoff({ agents: baton.core.agents, handoffs }, 'default', id, EVERYONE);
    expect(moved).toBe(true);
    expect(detail.handoff.deliveryState).toBe('WAITING');
    expect(detail.events.at(-1)?.toState).toBe('WAITING');
    expect(detail.handoff.revision).toBe(before.revision);
    // The move did commit: the next read shows it, row and timeline alike.
    const after = await getHandoff(baton.core, 'default', id, EVERYONE);
    expect([after.handoff.deliveryState, after.events.at(-1)?.toState]).toEqual(['HELD', 'HELD']);
    // Settled, so the checks below that wait for no open handoff are not held up by it.
    await baton.db.pool.query(`UPDATE handoffs SET delivery_state = 'CANCELLED', settled_at = now() WHERE id = $1`, [id]);
  });
});

describe('bad input', () => {
  const cases: Array<[string, () => Promise<{ status: number; body: any }>, number, string]> = [
    ['an unknown recipient', () => baton.post('/v1/handoffs', { from: 'planner', to: 'nobody', message: 'hi' }), 422, 'unknown_recipient'],
    ['an unknown sender', () => baton.post('/v1/handoffs', { from: 'ghost', to: 'engineer', message: 'hi' }), 422, 'unknown_sender'],
    [
      'malformed JSON',
      async () => {
        const res = await baton.app.inject({
          method: 'POST',
          url: '/v1/handoffs',
          payload: '{"from": "planner",',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${baton.adminToken}` },
        });
        return { status: res.statusCode, body: res.json() };
      },
      400,
      'invalid_json',
    ],
    ['a missing field', () => baton.post('/v1/handoffs', { from: 'planner', to: 'engineer' }), 400, 'validation_failed'],
    ['a wrong type', () => baton.post('/v1/handoffs', { from: 'planner', to: 'engineer', message: 42 }), 400, 'validation_failed'],
    [
      'an unknown field',
      () => baton.post('/v1/handoffs', { from: 'planner', to: 'engineer', message: 'hi', priority: 'high' }),
      400,
      'validation_failed',
    ],
    [
      'an oversized message',
      () => baton.post('/v1/handoffs', { from: 'planner', to: 'engineer', message: 'x'.repeat(32_001) }),
      400,
      'field_too_long',
    ],
    [
      'too many open questions',
      () => baton.post('/v1/handoffs', { from: 'planner', to: 'engineer', message: 'hi', context: { openQuestions: Array(21).fill('q') } }),
      400,
      'field_too_long',
    ],
    [
      'a body over the byte limit',
      () => baton.post('/v1/handoffs', { from: 'planner', to: 'engineer', message: 'x'.repeat(300_000) }),
      413,
      'body_too_large',
    ],
    [
      'an invalid agent id',
      () => baton.post('/v1/handoffs', { from: 'planner!', to: 'engineer', message: 'hi' }),
      400,
      'validation_failed',
    ],
    [
      'a bad due time',
      () => baton.post('/v1/handoffs', { from: 'planner', to: 'engineer', message: 'hi', dueAt: 'tomorrow' }),
      400,
      'validation_failed',
    ],
  ];

  for (const [what, call, status, code] of cases) {
    it(`refuses ${what} with ${status} ${code} and creates nothing`, async () => {
      // Let earlier deliveries finish so their events do not count as writes of this call.
      await eventually(async () => {
        const { rows } = await baton.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM handoffs WHERE settled_at IS NULL`);
        expect(rows[0]!.n).toBe(0);
      });
      const before = await counts();
      const res = await call();
      expect(res.status).toBe(status);
      expect(res.body.error.code).toBe(code);
      expect(typeof res.body.error.message).toBe('string');
      expect(await counts()).toEqual(before);
    });
  }

  it('answers an unknown route and an unknown handoff with stable codes', async () => {
    expect((await baton.get('/v1/nothing')).body.error.code).toBe('route_not_found');
    const missing = await baton.get('/v1/handoffs/00000000-0000-7000-8000-000000000099');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('handoff_not_found');
    // A malformed id is refused as such, before any lookup.
    const malformed = await baton.get('/v1/handoffs/not-a-uuid');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe('validation_failed');
  });
});

describe('agents', () => {
  it('refuses a provider Baton does not know, and settings its provider does not accept', async () => {
    expect((await baton.post('/v1/agents', { id: 'coder', provider: 'teleporter' })).body.error.code).toBe('validation_failed');
    const res = await baton.post('/v1/agents', { id: 'coder', provider: 'codex', settings: { colour: 'blue' } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_settings');
  });

  it('refuses a second active agent with the same id, case-insensitively', async () => {
    const res = await baton.post('/v1/agents', { id: 'Planner', provider: 'demo' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('agent_exists');
  });

  it('lists and removes agents; a removed recipient gets nothing redirected', async () => {
    expect((await baton.post('/v1/agents', { id: 'temp', provider: 'demo', settings: { behavior: 'hang' } })).status).toBe(201);
    const listed = await baton.get('/v1/agents');
    expect(listed.body.items.map((a: any) => a.id)).toContain('temp');
    // One hanging turn keeps temp busy; the second handoff waits behind it.
    const first = await baton.post('/v1/handoffs', { from: 'planner', to: 'temp', message: 'one' });
    await eventually(async () => expect((await baton.get(`/v1/handoffs/${first.body.id}`)).body.state).toBe('RUNNING'));
    const second = await baton.post('/v1/handoffs', { from: 'planner', to: 'temp', message: 'two' });
    await eventually(async () => expect((await baton.get(`/v1/handoffs/${second.body.id}`)).body.state).toBe('BUSY'));
    const removed = await baton.del('/v1/agents/temp');
    expect(removed.status).toBe(204);
    // The same id registered again is a new agent: old handoffs must not be redirected to it.
    expect((await baton.post('/v1/agents', { id: 'temp', provider: 'demo' })).status).toBe(201);
    const firstTurn = baton.host.history('temp')[0]!;
    baton.host.finish('temp', firstTurn.requestId);
    await eventually(async () => expect((await baton.get(`/v1/handoffs/${second.body.id}`)).body.state).toBe('UNAVAILABLE'));
    expect(baton.host.writesByHandoff().get(second.body.id)).toBeUndefined();
    const again = await baton.del('/v1/agents/nobody');
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('agent_not_found');
  });
});

describe('listing and status', () => {
  it('filters by recipient, sender and state, pages with a cursor, and counts by state', async () => {
    for (let i = 0; i < 5; i++) {
      expect((await baton.post('/v1/handoffs', { from: 'reviewer', to: 'planner', message: `note ${i}` })).status).toBe(201);
    }
    const page1 = await baton.get('/v1/handoffs?sender=reviewer&limit=2');
    expect(page1.status).toBe(200);
    expect(page1.body.items).toHaveLength(2);
    expect(page1.body.items.map((h: any) => h.message)).toEqual(['note 4', 'note 3']);
    const page2 = await baton.get(`/v1/handoffs?sender=reviewer&limit=2&cursor=${page1.body.nextCursor}`);
    expect(page2.body.items.map((h: any) => h.message)).toEqual(['note 2', 'note 1']);
    const page3 = await baton.get(`/v1/handoffs?sender=reviewer&limit=2&cursor=${page2.body.nextCursor}`);
    expect(page3.body.items.map((h: any) => h.message)).toEqual(['note 0']);
    expect(page3.body.nextCursor).toBeNull();

    await eventually(async () => {
      const returned = await baton.get('/v1/handoffs?recipient=planner&state=RETURNED&limit=200');
      expect(returned.body.items.filter((h: any) => h.from === 'reviewer')).toHaveLength(5);
    });
    const none = await baton.get('/v1/handoffs?recipient=planner&state=FAILED');
    expect(none.body.items).toEqual([]);
    expect((await baton.get('/v1/handoffs?state=NOPE')).body.error.code).toBe('validation_failed');
    expect((await baton.get('/v1/handoffs?cursor=garbage')).body.error.code).toBe('invalid_cursor');
    expect((await baton.get('/v1/handoffs?limit=0')).body.error.code).toBe('validation_failed');
    expect((await baton.get('/v1/handoffs?limit=500')).body.error.code).toBe('validation_failed');

    const status = await baton.get('/v1/status');
    const { rows } = await baton.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM handoffs');
    expect(status.body.total).toBe(rows[0]!.n);
    expect(status.body.byState.RETURNED).toBeGreaterThanOrEqual(6);
    expect(Object.keys(status.body.byState)).toHaveLength(14);
  });

  it('reports health and readiness', async () => {
    expect((await baton.get('/v1/health')).body).toEqual({ ok: true });
    const ready = await baton.get('/v1/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ ready: true, checks: { database: 'up', redis: 'up' } });
  });
});
