import type { DeliveryState } from './delivery-states.ts';
import { assertNever, BatonError } from './errors.ts';

/**
 * The work state of a handoff with a title (work): separate from delivery. A plain message
 * has none. open -> claimed -> returned -> closed, or cancelled / expired.
 */
export const WORK_STATES = ['open', 'claimed', 'returned', 'closed', 'cancelled', 'expired'] as const;
export type WorkState = (typeof WORK_STATES)[number];

/** Where work starts when it is sent (a duplicate of work in progress starts settled instead). */
export const INITIAL_WORK_STATE: WorkState = 'open';

/** Work nobody does any more: no move leaves these (test/unit/work-states.test.ts holds it). */
export const SETTLED_WORK_STATES: readonly WorkState[] = ['closed', 'cancelled', 'expired'];

/** Work still under way: what the board shows and what SQL reads as "not settled". */
export const ACTIVE_WORK_STATES: readonly WorkState[] = WORK_STATES.filter((s) => !SETTLED_WORK_STATES.includes(s));

export const WORK_EVENTS = [
  /** A receiver took the work (exactly one wins). */
  'claimed',
  /** The claimant gave up the claim: a failed return frees the work for a new claim. */
  'return_failed',
  /** The claim's lease ran out without a heartbeat. */
  'lease_expired',
  /** The claimant (or, for a push turn that ended with a result, Baton) returned the result. */
  'returned',
  /** The sender accepted the result. */
  'closed_accepted',
  /** The sender sent it back with a note (same handoff, attempt + 1). */
  'revision_requested',
  /** The sender closed it as blocked. */
  'closed_blocked',
  /** The sender withdrew it, or its delivery was cancelled (released, proven absent). */
  'cancelled',
  /** Nobody can do it as addressed any more (the recipient is gone, or it is a duplicate). */
  'expired',
] as const;
export type WorkEvent = (typeof WORK_EVENTS)[number];

export const WORK_ACTORS = ['sender', 'recipient', 'claimant', 'system'] as const;
export type WorkActor = (typeof WORK_ACTORS)[number];

/**
 * What a move does to the current attempt's result (`return_outcome`, `result_summary`,
 * `result`, `result_fact_ids`, `returned_at`): a return records its outcome; a move that
 * starts a new attempt clears the last one's (it stays in the return's event row).
 * Absent: the result is left as it is.
 */
export type WorkResultEffect = 'succeeded' | 'failed' | 'cleared';

export interface WorkRule {
  readonly from: readonly WorkState[];
  readonly event: WorkEvent;
  readonly to: WorkState;
  readonly actors: readonly WorkActor[];
  readonly result?: WorkResultEffect;
}

/**
 * The work transition table: the only place that says how work may move and what a move does
 * to the attempt's result. libs/handoffs/README.md carries its diagram (generated; a test
 * holds the two together).
 */
export const WORK_TRANSITIONS: readonly WorkRule[] = [
  { from: ['open'], event: 'claimed', to: 'claimed', actors: ['recipient'], result: 'cleared' },
  { from: ['claimed'], event: 'return_failed', to: 'open', actors: ['claimant'], result: 'failed' },
  { from: ['claimed'], event: 'lease_expired', to: 'open', actors: ['system'] },
  { from: ['claimed'], event: 'returned', to: 'returned', actors: ['claimant'], result: 'succeeded' },
  { from: ['open', 'claimed'], event: 'returned', to: 'returned', actors: ['system'], result: 'succeeded' },
  { from: ['returned'], event: 'closed_accepted', to: 'closed', actors: ['sender'] },
  { from: ['returned'], event: 'revision_requested', to: 'open', actors: ['sender'], result: 'cleared' },
  { from: ['returned', 'claimed', 'open'], event: 'closed_blocked', to: 'closed', actors: ['sender'] },
  { from: ['open', 'claimed'], event: 'cancelled', to: 'cancelled', actors: ['sender', 'system'] },
  { from: ['open', 'claimed'], event: 'expired', to: 'expired', actors: ['system'] },
];

/**
 * Why work in state `from` cannot take `event`, in the words of the person who asked, with what
 * to do instead. The table above decides; this only explains.
 */
export function refusedWorkMove(from: WorkState, event: WorkEvent): string {
  const over = from === 'closed' || from === 'cancelled' || from === 'expired';
  switch (event) {
    case 'claimed':
      return over ? `its work is already ${from}: there is nothing left to accept` : `its work is already ${from}`;
    case 'cancelled':
      if (from === 'returned')
        return 'its work was already returned: close it instead (close accepted, revision --note …, or blocked --note …)';
      return `its work is already ${from}: there is nothing left to cancel`;
    case 'returned':
    case 'return_failed':
      return over ? `its work is already ${from}: there is nothing left to return` : `its work is ${from}, not claimed: accept it first`;
    case 'closed_accepted':
    case 'revision_requested':
      return over
        ? `its work is already ${from}`
        : `its work is ${from}: it has not been returned yet (wait for the return, or close it blocked)`;
    case 'closed_blocked':
      return `its work is already ${from}`;
    case 'lease_expired':
    case 'expired':
      return `its work is ${from}`;
    default:
      return assertNever(event, 'work event');
  }
}

/** The rule a move follows. Pure. @throws BatonError invalid_transition, transition_not_permitted */
export function planWorkMove(from: WorkState, event: WorkEvent, actor: WorkActor): WorkRule {
  const rules = WORK_TRANSITIONS.filter((r) => r.event === event && r.from.includes(from));
  if (rules.length === 0) throw new BatonError('invalid_transition', refusedWorkMove(from, event), { from, event });
  const rule = rules.find((r) => r.actors.includes(actor));
  if (!rule) throw new BatonError('transition_not_permitted', `the ${actor} may not cause ${event}`, { from, event, actor });
  return rule;
}

/**
 * Plans a work move. Pure.
 * @throws BatonError invalid_transition (no such move), transition_not_permitted (not this actor)
 */
export function planWorkTransition(from: WorkState, event: WorkEvent, actor: WorkActor): WorkState {
  return planWorkMove(from, event, actor).to;
}

/** Work states from which `claimed` is allowed: what the claim, the inbox and the board's "ready" read as claimable. */
export const CLAIMABLE_WORK_STATES: readonly WorkState[] = WORK_TRANSITIONS.filter((r) => r.event === 'claimed').flatMap((r) => r.from);

/**
 * The work move Baton makes when a delivery ends where nobody will do the work: a cancelled
 * delivery (released, proven absent, withdrawn) cancels it, an unavailable one (recipient
 * gone) or a duplicate expires it. RETURNED returns the work only with a turn's result
 * (deliver-turn.ts says so explicitly), FAILED leaves it to the sender (the board asks them to
 * resend or cancel), ACKNOWLEDGED ends plain messages only.
 */
const WORK_EVENT_WHEN_SETTLED: Partial<Record<DeliveryState, WorkEvent>> = {
  CANCELLED: 'cancelled',
  UNAVAILABLE: 'expired',
  DUPLICATE: 'expired',
};

/**
 * The work rule Baton follows (role `system`) when a delivery reaches `delivery`: its event,
 * every work state it applies from, and the target. null when the work stays as it is.
 */
export function workMoveWhenDeliverySettles(delivery: DeliveryState): WorkRule | null {
  const event = WORK_EVENT_WHEN_SETTLED[delivery];
  if (!event) return null;
  const rule = WORK_TRANSITIONS.find((r) => r.event === event && r.actors.includes('system'));
  if (!rule) throw new Error(`the work table has no system rule for ${event}`);
  return rule;
}

/** Every (from, event, actor) the table allows, one row each: for tests and the diagram. */
export function moveWorkEdges(): Array<{ from: WorkState; event: WorkEvent; to: WorkState; actor: WorkActor }> {
  return WORK_TRANSITIONS.flatMap((r) => r.from.flatMap((from) => r.actors.map((actor) => ({ from, event: r.event, to: r.to, actor }))));
}

export function isWorkState(v: unknown): v is WorkState {
  return typeof v === 'string' && (WORK_STATES as readonly string[]).includes(v);
}
