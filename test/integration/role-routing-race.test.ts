import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findWriteViolations } from '../../libs/adapters/demo/demo-agent-host.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * Routing by role as a race (issue 34): four delivery workers, ten push members of one role
 * with uneven turn lengths, three senders sending 150 handoffs to the role at once. Every worker
 * tries to bind for every member whose queue empties, so the same handoffs are fought over all
 * the time: each must be bound exactly once, written exactly once, and no member may ever have
 * two turns at once.
 */

const MEMBERS = 10;
const SENDERS = ['s1', 's2', 's3'];
const PER_SENDER = 50;
const TOTAL = SENDERS.length * PER_SENDER;

let baton: TestBaton;
const members = Array.from({ length: MEMBERS }, (_, i) => `m${i}`);

beforeAll(async () => {
  baton = await startTestBaton({ queueShards: 2 });
  for (const [i, id] of members.entries()) {
    // Uneven turns: 10 ms to 100 ms.
    const res = await baton.post('/v1/agents', { id, provider: 'demo', roles: ['builder'], settings: { thinkMs: 10 + i * 10 } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  }
  for (const id of SENDERS) expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
  for (let w = 0; w < 4; w++) baton.startWorker({ concurrency: 8 });
}, 60_000);

afterAll(async () => {
  await baton?.stop();
});

describe('many workers, many members, many handoffs to one role', () => {
  it('binds and delivers each handoff exactly once, never two turns at once for any member', async () => {
    const sends = SENDERS.flatMap((from) =>
      Array.from({ length: PER_SENDER }, (_, i) =>
        baton.post('/v1/handoffs', { from, to: '@role:builder', title: `${from} ${i}`, message: `${from} ${i}` }),
      ),
    );
    const sent = await Promise.all(sends);
    expect(sent.filter((r) => r.status !== 201).map((r) => r.body)).toEqual([]);
    const ids = new Set(sent.map((r) => r.body.id as string));
    expect(ids.size).toBe(TOTAL);

    await eventually(
      async () => {
        const { rows } = await baton.db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM handoffs WHERE recipient_role = 'builder' AND delivery_state = 'RETURNED'`,
        );
        expect(rows[0]!.n).toBe(TOTAL);
      },
      { timeoutMs: 60_000, what: `all ${TOTAL} role handoffs RETURNED` },
    );

    // Bound exactly once each (no reroute: nobody was removed or stayed busy), to a member.
    const { rows: routed } = await baton.db.pool.query<{ handoff_id: string; n: number; agent: string }>(
      `SELECT handoff_id, count(*)::int AS n, min(detail->>'agent') AS agent FROM handoff_events
       WHERE event IN ('routed', 'rerouted') GROUP BY handoff_id`,
    );
    expect(routed).toHaveLength(TOTAL);
    expect(routed.filter((r) => r.n !== 1)).toEqual([]);
    const { rows: bound } = await baton.db.pool.query<{ id: string; handle: string }>(
      `SELECT h.id, r.handle FROM handoffs h JOIN agents r ON r.id = h.recipient_id WHERE h.recipient_role = 'builder'`,
    );
    const boundTo = new Map(bound.map((b) => [b.id, b.handle]));
    for (const r of routed) expect(boundTo.get(r.handoff_id)).toBe(r.agent);

    // Written exactly once: each handoff is one turn in exactly one member's session, the one it is bound to.
    const turns = members.flatMap((m) => baton.host.history(m).map((t) => ({ member: m, handoffId: t.handoffId })));
    expect(turns).toHaveLength(TOTAL);
    expect(new Set(turns.map((t) => t.handoffId))).toEqual(ids);
    for (const t of turns) expect(boundTo.get(t.handoffId)).toBe(t.member);

    // Never two turns at once: no write reached a member while another of its turns was live.
    for (const m of members) expect(findWriteViolations(baton.host.writes(m)), m).toEqual([]);
    for (const s of baton.host.stats().filter((x) => members.includes(x.session))) expect(s.overlapAttempts, s.session).toBe(0);

    // Every member took part, and the quick ones took more than the slow ones.
    const load = members.map((m) => baton.host.history(m).length);
    expect(Math.min(...load)).toBeGreaterThan(0);
    expect(load[0]!).toBeGreaterThan(load[MEMBERS - 1]!);
  }, 120_000);
});
