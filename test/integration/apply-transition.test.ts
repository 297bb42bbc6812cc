import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DELIVERY_STATES } from '../../libs/domain/delivery-states.ts';
import { hasErrorCode } from '../../libs/domain/errors.ts';
import { DELIVERY_EVENTS, transitionEdges, type ActorKind } from '../../libs/domain/transitions.ts';
import { applyTransition, type HandoffAtRevision } from '../../libs/handoffs/apply-transition.ts';
import { sendHandoff } from '../../libs/handoffs/send-handoff.ts';
import { registerAgent } from '../../libs/handoffs/manage-agents.ts';
import { TRANSITIONS } from '../../libs/domain/transitions.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

let baton: TestBaton;

beforeAll(async () => {
  baton = await startTestBaton();
  // Recipients are pull-only (manual), so no worker moves these handoffs behind the test's back.
  await registerAgent(baton.core, { project: 'default', handle: 'a', provider: 'demo' });
});

afterAll(async () => {
  await baton?.stop();
});

/** A fresh handoff put straight into `state` (test set-up only: bypasses the table on purpose). */
let recipients = 0;

async function handoffIn(state: string): Promise<HandoffAtRevision> {
  // A fresh recipient each time: no other handoff of it is in flight, so it enrolls WAITING.
  const to = `r${++recipients}`;
  await registerAgent(baton.core, { project: 'default', handle: to, provider: 'manual' });
  const { handoff } = await sendHandoff(baton.core, { project: 'default', from: 'a', to, message: `in ${state} ${Math.random()}` });
  await baton.db.pool.query(`UPDATE handoffs SET delivery_state = $2::delivery_state, revision = 7 WHERE id = $1`, [handoff.id, state]);
  return {
    id: handoff.id,
    deliveryState: state as HandoffAtRevision['deliveryState'],
    revision: 7,
    attemptCount: 0,
    refusals: 0,
    errorResends: 0,
    interruptResends: 0,
  };
}

async function row(id: string) {
  const { rows } = await baton.db.pool.query<{ delivery_state: string; revision: number; settled_at: Date | null }>(
    'SELECT delivery_state, revision, settled_at FROM handoffs WHERE id = $1',
    [id],
  );
  const { rows: events } = await baton.db.pool.query<{
    from_state: string | null;
    to_state: string;
    event: string;
    revision: number;
    actor_kind: string;
  }>('SELECT from_state, to_state, event, revision, actor_kind FROM handoff_events WHERE handoff_id = $1 ORDER BY id', [id]);
  return { ...rows[0]!, events };
}

describe('applyTransition against Postgres', () => {
  it('performs every move of the table: new state, revision + 1, one event row, in one write', async () => {
    const edges = transitionEdges().filter((e) => e.from !== null);
    for (const edge of edges) {
      const rule = TRANSITIONS.find((r) => r.event === edge.event)!;
      const actor = rule.actors[0] as ActorKind;
      const h = await handoffIn(edge.from!);
      const moved = await applyTransition(baton.core, h, edge.event, { kind: actor, id: 'tester' }, { reason: 'walk' });
      expect(moved.deliveryState).toBe(edge.to);
      expect(moved.revision).toBe(8);
      const r = await row(h.id);
      expect(r.delivery_state).toBe(edge.to);
      expect(r.revision).toBe(8);
      expect(r.events.at(-1)).toEqual({ from_state: edge.from, to_state: edge.to, event: edge.event, revision: 8, actor_kind: actor });
      expect(r.settled_at !== null).toBe(['UNAVAILABLE', 'RETURNED', 'FAILED', 'ACKNOWLEDGED', 'CANCELLED', 'DUPLICATE'].includes(edge.to));
    }
  });

  it('refuses every move the table does not list and writes nothing', async () => {
    let refused = 0;
    for (const state of DELIVERY_STATES) {
      const h = await handoffIn(state);
      for (const event of DELIVERY_EVENTS) {
        if (transitionEdges().some((e) => e.from === state && e.event === event)) continue;
        await expect(applyTransition(baton.core, h, event, { kind: 'system', id: null })).rejects.toSatisfy((err: unknown) =>
          hasErrorCode(err, 'invalid_transition'),
        );
        refused++;
      }
      const r = await row(h.id);
      expect(r.revision).toBe(7);
      expect(r.events).toHaveLength(1);
    }
    expect(refused).toBeGreaterThan(300);
  });

  it('refuses a writer holding a stale revision (409 stale_revision) and writes nothing', async () => {
    const h = await handoffIn('WAITING');
    await applyTransition(baton.core, h, 'recipient_busy', { kind: 'system', id: 'w1' });
    await expect(applyTransition(baton.core, h, 'attempt_reserved', { kind: 'system', id: 'w2' })).rejects.toSatisfy(
      (err: unknown) => hasErrorCode(err, 'stale_revision') && (err as { status: number }).status === 409,
    );
    const r = await row(h.id);
    expect(r.delivery_state).toBe('BUSY');
    expect(r.revision).toBe(8);
    expect(r.events.map((e) => e.event)).toEqual(['enrolled', 'recipient_busy']);
  });

  it('lets exactly one of many racing writers win a move', async () => {
    const h = await handoffIn('WAITING');
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => applyTransition(baton.core, h, 'attempt_reserved', { kind: 'system', id: `w${i}` })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'rejected' && hasErrorCode(r.reason, 'stale_revision'))).toHaveLength(19);
    const r = await row(h.id);
    expect(r.events.filter((e) => e.event === 'attempt_reserved')).toHaveLength(1);
  });

  it('refuses to edit or delete the event log', async () => {
    const h = await handoffIn('WAITING');
    await expect(baton.db.pool.query(`UPDATE handoff_events SET reason = 'x' WHERE handoff_id = $1`, [h.id])).rejects.toThrow(
      /append-only/,
    );
    await expect(baton.db.pool.query(`DELETE FROM handoff_events WHERE handoff_id = $1`, [h.id])).rejects.toThrow(/append-only/);
  });
});

describe('applyTransitions (a chain in one statement)', () => {
  it('writes each move as its own event with consecutive revisions, ending in the last state', async () => {
    const h = await handoffIn('SENDING');
    const { applyTransitions } = await import('../../libs/handoffs/apply-transition.ts');
    const moved = await applyTransitions(
      baton.core,
      h,
      [['turn_accepted'], ['turn_started'], ['turn_returned', { patch: { resultSummary: 'done' } }]],
      { kind: 'system', id: 'w' },
    );
    expect(moved).toMatchObject({ deliveryState: 'RETURNED', revision: 10 });
    const r = await row(h.id);
    expect(r.delivery_state).toBe('RETURNED');
    expect(r.settled_at).not.toBeNull();
    expect(r.events.slice(1)).toEqual([
      { from_state: 'SENDING', to_state: 'ACCEPTED', event: 'turn_accepted', revision: 8, actor_kind: 'system' },
      { from_state: 'ACCEPTED', to_state: 'RUNNING', event: 'turn_started', revision: 9, actor_kind: 'system' },
      { from_state: 'RUNNING', to_state: 'RETURNED', event: 'turn_returned', revision: 10, actor_kind: 'system' },
    ]);
  });

  it('refuses the whole chain, writing nothing, when any move is not in the table', async () => {
    const h = await handoffIn('SENDING');
    const { applyTransitions } = await import('../../libs/handoffs/apply-transition.ts');
    await expect(
      applyTransitions(baton.core, h, [['turn_accepted'], ['turn_returned'], ['turn_started']], { kind: 'system', id: 'w' }),
    ).rejects.toSatisfy((err: unknown) => hasErrorCode(err, 'invalid_transition'));
    const r = await row(h.id);
    expect(r.delivery_state).toBe('SENDING');
    expect(r.events).toHaveLength(1);
  });
});
