import { describe, expect, it } from 'vitest';
import { SETTLED_STATES } from '../../libs/domain/delivery-states.ts';
import { BatonError } from '../../libs/domain/errors.ts';
import { TRANSITIONS } from '../../libs/domain/transitions.ts';
import {
  ACTIVE_WORK_STATES,
  CLAIMABLE_WORK_STATES,
  SETTLED_WORK_STATES,
  WORK_ACTORS,
  WORK_EVENTS,
  WORK_STATES,
  WORK_TRANSITIONS,
  planWorkMove,
  planWorkTransition,
  workMoveWhenDeliverySettles,
  moveWorkEdges,
} from '../../libs/domain/work-states.ts';

describe('the work transition table', () => {
  it('allows exactly the moves it lists, for exactly the actors it lists, and refuses every other with a stable code', () => {
    let allowed = 0;
    let refused = 0;
    for (const from of WORK_STATES) {
      for (const event of WORK_EVENTS) {
        for (const actor of WORK_ACTORS) {
          const rules = WORK_TRANSITIONS.filter((r) => r.event === event && r.from.includes(from));
          const rule = rules.find((r) => r.actors.includes(actor));
          if (rule) {
            expect(planWorkTransition(from, event, actor)).toBe(rule.to);
            expect(planWorkMove(from, event, actor)).toBe(rule);
            allowed++;
            continue;
          }
          let caught: unknown;
          try {
            planWorkTransition(from, event, actor);
          } catch (err) {
            caught = err;
          }
          expect(caught, `${from} --${event}/${actor}--> must be refused`).toBeInstanceOf(BatonError);
          expect((caught as BatonError).code).toBe(rules.length > 0 ? 'transition_not_permitted' : 'invalid_transition');
          refused++;
        }
      }
    }
    expect(allowed).toBe(new Set(moveWorkEdges().map((e) => `${e.from}|${e.event}|${e.actor}`)).size);
    expect(refused).toBeGreaterThan(allowed);
  });

  it('gives one target per (from, event, actor), so a move never depends on anything but the table', () => {
    const keys = moveWorkEdges().map((e) => `${e.from}|${e.event}|${e.actor}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('reaches every work state, leaves every active one, and never leaves a settled one', () => {
    const edges = moveWorkEdges();
    for (const s of WORK_STATES.filter((x) => x !== 'open'))
      expect(
        edges.some((e) => e.to === s),
        `${s} is reachable`,
      ).toBe(true);
    for (const s of ACTIVE_WORK_STATES)
      expect(
        edges.some((e) => e.from === s),
        `${s} can be left`,
      ).toBe(true);
    for (const s of SETTLED_WORK_STATES)
      expect(
        edges.some((e) => e.from === s),
        `${s} is final`,
      ).toBe(false);
    expect([...ACTIVE_WORK_STATES, ...SETTLED_WORK_STATES].sort()).toEqual([...WORK_STATES].sort());
  });

  it("says what each move does to the attempt's result: a return sets its outcome, a new claim or a revision clears it", () => {
    const result = (event: string, actor: (typeof WORK_ACTORS)[number]) =>
      WORK_TRANSITIONS.find((r) => r.event === event && r.actors.includes(actor))?.result;
    expect(result('returned', 'claimant')).toBe('succeeded');
    expect(result('returned', 'system')).toBe('succeeded');
    expect(result('return_failed', 'claimant')).toBe('failed');
    expect(result('claimed', 'recipient')).toBe('cleared');
    expect(result('revision_requested', 'sender')).toBe('cleared');
    expect(CLAIMABLE_WORK_STATES).toEqual(['open']);
  });

  it('settles the work of every delivery that ends where nobody will do it (cancelled, unavailable, duplicate), as Baton', () => {
    for (const [delivery, workTo] of [
      ['CANCELLED', 'cancelled'],
      ['UNAVAILABLE', 'expired'],
      ['DUPLICATE', 'expired'],
    ] as const) {
      const m = workMoveWhenDeliverySettles(delivery);
      expect(m?.to, delivery).toBe(workTo);
      for (const from of m!.from) expect(planWorkTransition(from, m!.event, 'system')).toBe(workTo);
      expect([...m!.from].sort()).toEqual(['claimed', 'open']);
    }
    // Only settled delivery states settle work; a returned or failed delivery leaves it to people.
    for (const rule of TRANSITIONS) {
      const m = workMoveWhenDeliverySettles(rule.to);
      if (m) expect(SETTLED_STATES.has(rule.to)).toBe(true);
    }
    for (const s of ['RETURNED', 'FAILED', 'ACKNOWLEDGED', 'WAITING', 'RUNNING'] as const)
      expect(workMoveWhenDeliverySettles(s)).toBeNull();
  });
});
