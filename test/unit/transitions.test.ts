import { describe, expect, it } from 'vitest';
import { DELIVERY_STATES, SETTLED_STATES } from '../../libs/domain/delivery-states.ts';
import { BatonError } from '../../libs/domain/errors.ts';
import {
  ACTOR_KINDS,
  ALL_FROM_STATES,
  DELIVERY_EVENTS,
  TRANSITIONS,
  findTransition,
  planTransition,
  transitionEdges,
} from '../../libs/domain/transitions.ts';

describe('the transition table', () => {
  it('allows exactly the moves it lists, for exactly the actors it lists, and refuses every other with a stable code', () => {
    let allowed = 0;
    let refused = 0;
    for (const from of ALL_FROM_STATES) {
      for (const event of DELIVERY_EVENTS) {
        for (const actor of ACTOR_KINDS) {
          const rule = TRANSITIONS.find((r) => r.event === event && r.from.includes(from));
          if (rule && rule.actors.includes(actor)) {
            expect(planTransition(from, event, actor)).toBe(rule.to);
            allowed++;
            continue;
          }
          let caught: unknown;
          try {
            planTransition(from, event, actor);
          } catch (err) {
            caught = err;
          }
          expect(caught, `${from} --${event}/${actor}--> must be refused`).toBeInstanceOf(BatonError);
          expect((caught as BatonError).code).toBe(rule ? 'transition_not_permitted' : 'invalid_transition');
          refused++;
        }
      }
    }
    expect(allowed).toBe(TRANSITIONS.reduce((n, r) => n + r.from.length * r.actors.length, 0));
    expect(refused).toBeGreaterThan(allowed);
  });

  it('has one rule per (from, event), so a move never depends on anything but the table', () => {
    const keys = transitionEdges().map((e) => `${e.from}|${e.event}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const e of transitionEdges()) expect(findTransition(e.from, e.event)?.to).toBe(e.to);
  });

  it('reaches every delivery state and leaves every non-settled state', () => {
    const targets = new Set(transitionEdges().map((e) => e.to));
    for (const s of DELIVERY_STATES) expect(targets.has(s), `${s} is reachable`).toBe(true);
    const sources = new Set(transitionEdges().map((e) => e.from));
    for (const s of DELIVERY_STATES) {
      if (!SETTLED_STATES.has(s)) expect(sources.has(s), `${s} can be left`).toBe(true);
    }
  });

  it('keeps settled states settled, except a sender asking for a revision of returned work and a recipient acknowledging it', () => {
    const leaving = transitionEdges().filter((e) => e.from !== null && SETTLED_STATES.has(e.from));
    expect(leaving.map((e) => `${e.from}:${e.event}`).sort()).toEqual(['RETURNED:acknowledged', 'RETURNED:revision_requested']);
  });

  it('lets only Baton itself move a delivery through a write (SENDING and its outcomes)', () => {
    for (const e of TRANSITIONS.filter((r) => r.from.includes('SENDING') || r.to === 'SENDING')) {
      expect(e.actors).toEqual(['system']);
    }
  });

  it('never lets UNCERTAIN go back to a state that would resend the write blindly', () => {
    const fromUncertain = transitionEdges().filter((e) => e.from === 'UNCERTAIN');
    const to = fromUncertain.map((e) => e.to);
    expect(to).not.toContain('SENDING');
    // Back to WAITING only on proof that nothing was written: the reserving worker's own word
    // that it never handed the attempt to an adapter (it lost its lock first).
    expect(fromUncertain.filter((e) => e.to === 'WAITING').map((e) => e.event)).toEqual(['unsent_proven']);
    // The only ways back to a resend are the observations that found the turn and saw that it
    // did nothing (the recipient answered busy, or refused): a resend then is not blind.
    const towardResend = fromUncertain
      .filter((e) => e.to === 'BUSY' || e.to === 'OWNER_REJECTED')
      .map((e) => e.event)
      .sort();
    expect(towardResend).toEqual(['owner_rejected', 'session_busy']);
    for (const event of towardResend) expect(findTransition('UNCERTAIN', event)?.actors).toEqual(['system']);
  });
});
