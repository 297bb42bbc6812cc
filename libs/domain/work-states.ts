import { BatonError } from './errors.ts';

/**
 * The work state of a handoff with a title (work): separate from delivery. A plain message
 * has none. open -> claimed -> returned -> closed, or cancelled / expired.
 */
export const WORK_STATES = ['open', 'claimed', 'returned', 'closed', 'cancelled', 'expired'] as const;
export type WorkState = (typeof WORK_STATES)[number];

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
  /** The sender withdrew it. */
  'cancelled',
  /** Nobody can do it as addressed any more (the delivery ended without a turn). */
  'expired',
] as const;
export type WorkEvent = (typeof WORK_EVENTS)[number];

export type WorkActor = 'sender' | 'recipient' | 'claimant' | 'system';

export interface WorkRule {
  readonly from: readonly WorkState[];
  readonly event: WorkEvent;
  readonly to: WorkState;
  readonly actors: readonly WorkActor[];
}

/** The work transition table: the only place that says how work may move. */
export const WORK_TRANSITIONS: readonly WorkRule[] = [
  { from: ['open'], event: 'claimed', to: 'claimed', actors: ['recipient'] },
  { from: ['claimed'], event: 'return_failed', to: 'open', actors: ['claimant'] },
  { from: ['claimed'], event: 'lease_expired', to: 'open', actors: ['system'] },
  { from: ['claimed'], event: 'returned', to: 'returned', actors: ['claimant'] },
  { from: ['open', 'claimed'], event: 'returned', to: 'returned', actors: ['system'] },
  { from: ['returned'], event: 'closed_accepted', to: 'closed', actors: ['sender'] },
  { from: ['returned'], event: 'revision_requested', to: 'open', actors: ['sender'] },
  { from: ['returned', 'claimed', 'open'], event: 'closed_blocked', to: 'closed', actors: ['sender'] },
  { from: ['open', 'claimed'], event: 'cancelled', to: 'cancelled', actors: ['sender'] },
  { from: ['open'], event: 'expired', to: 'expired', actors: ['system'] },
];

/**
 * Plans a work move. Pure.
 * @throws BatonError invalid_transition (no such move), transition_not_permitted (not this actor)
 */
export function planWorkTransition(from: WorkState, event: WorkEvent, actor: WorkActor): WorkState {
  const rules = WORK_TRANSITIONS.filter((r) => r.event === event && r.from.includes(from));
  if (rules.length === 0) throw new BatonError('invalid_transition', `work that is ${from} cannot take the event ${event}`, { from, event });
  const rule = rules.find((r) => r.actors.includes(actor));
  if (!rule) throw new BatonError('transition_not_permitted', `the ${actor} may not cause ${event}`, { from, event, actor });
  return rule.to;
}

export function isWorkState(v: unknown): v is WorkState {
  return typeof v === 'string' && (WORK_STATES as readonly string[]).includes(v);
}
