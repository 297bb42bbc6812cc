import { DELIVERY_STATES, type DeliveryState } from './delivery-states.ts';
import { BatonError } from './errors.ts';

/** Who may cause a move. `system` is Baton itself: workers, the reconciler and timers. */
export const ACTOR_KINDS = ['system', 'sender', 'recipient', 'operator'] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];

/**
 * Every event that moves a delivery. The names are stable: they are stored in the event log
 * (handoff_events.event) and shown to users.
 */
export const DELIVERY_EVENTS = [
  'enrolled',
  'duplicate_detected',
  'recipient_busy',
  'held',
  'hold_lifted',
  'provider_outage',
  'recipient_gone',
  'routed',
  'rerouted',
  'attempt_reserved',
  'turn_accepted',
  'session_busy',
  'owner_rejected',
  'rejected_twice',
  'send_failed',
  'send_gave_up',
  'reply_lost',
  'lock_lost',
  'unsent_proven',
  'turn_started',
  'turn_returned',
  'turn_failed_resend',
  'turn_failed',
  'turn_interrupted_resend',
  'turn_interrupted',
  'unobservable',
  'observed_accepted',
  'observed_running',
  'observed_returned',
  'scan_missed',
  'proven_absent',
  'released',
  'cancelled',
  'acknowledged',
  'claimed',
  'claim_released',
  'claim_cancelled',
  'work_returned',
  'revision_requested',
] as const;
export type DeliveryEvent = (typeof DELIVERY_EVENTS)[number];

/** `null` as a from-state means the handoff is being created. */
export type FromState = DeliveryState | null;

export interface TransitionRule {
  readonly from: readonly FromState[];
  readonly event: DeliveryEvent;
  readonly to: DeliveryState;
  readonly actors: readonly ActorKind[];
  /** Why the move exists, shown in the generated state table. */
  readonly note: string;
}

const SYS = ['system'] as const;

/**
 * THE transition table. Nothing else decides whether a delivery may move: `planTransition`
 * reads it, `applyTransition` (libs/handoffs) enforces it, and the README's diagram is checked
 * against it. (from, event) pairs are unique, so a move's target never depends on anything else.
 */
export const TRANSITIONS: readonly TransitionRule[] = [
  { from: [null], event: 'enrolled', to: 'WAITING', actors: ['sender'], note: 'recorded and queued for its recipient' },
  { from: [null], event: 'duplicate_detected', to: 'DUPLICATE', actors: ['sender'], note: 'same content as a handoff still in progress' },
  { from: ['WAITING'], event: 'recipient_busy', to: 'BUSY', actors: SYS, note: 'the recipient is in a turn; wait' },
  {
    from: ['WAITING', 'BUSY', 'OWNER_REJECTED'],
    event: 'held',
    to: 'HELD',
    actors: SYS,
    note: 'a deliberate block: connection blocked, delivery paused, or a budget spent',
  },
  { from: ['HELD'], event: 'hold_lifted', to: 'WAITING', actors: ['system', 'operator'], note: 'the block is gone' },
  {
    from: ['WAITING', 'BUSY', 'OWNER_REJECTED'],
    event: 'provider_outage',
    to: 'WAITING',
    actors: SYS,
    note: 'provider outage: wait without spending an attempt',
  },
  {
    from: ['WAITING', 'BUSY', 'HELD', 'OWNER_REJECTED', 'SENDING', 'ACCEPTED'],
    event: 'recipient_gone',
    to: 'UNAVAILABLE',
    actors: SYS,
    note: "the agent or its session no longer exists (from ACCEPTED: a removed agent's pull claim, no turn written); never redirected",
  },
  {
    from: ['WAITING'],
    event: 'routed',
    to: 'WAITING',
    actors: SYS,
    note: 'a handoff sent to a role is bound to one capable agent at dispatch time (the candidates and why this one in its detail)',
  },
  {
    from: ['WAITING', 'BUSY', 'HELD', 'OWNER_REJECTED'],
    event: 'rerouted',
    to: 'WAITING',
    actors: SYS,
    note: 'no turn written yet and its agent was removed or stayed busy past BATON_ROLE_REROUTE_AFTER_MS: unbound, to be routed again',
  },
  {
    from: ['WAITING', 'BUSY', 'OWNER_REJECTED'],
    event: 'attempt_reserved',
    to: 'SENDING',
    actors: SYS,
    note: 'attempt and request id committed before the write',
  },
  { from: ['SENDING'], event: 'turn_accepted', to: 'ACCEPTED', actors: SYS, note: 'the session took the turn' },
  {
    from: ['SENDING', 'ACCEPTED', 'RUNNING', 'UNCERTAIN'],
    event: 'session_busy',
    to: 'BUSY',
    actors: SYS,
    note: 'the session said it is busy (at the write, or after it: nothing was done)',
  },
  {
    from: ['SENDING', 'ACCEPTED', 'RUNNING', 'UNCERTAIN'],
    event: 'owner_rejected',
    to: 'OWNER_REJECTED',
    actors: SYS,
    note: 'the session refused the turn (at the write, or after it: nothing was done); one retry follows',
  },
  { from: ['OWNER_REJECTED'], event: 'rejected_twice', to: 'FAILED', actors: SYS, note: 'refused again; the recipient is not held' },
  {
    from: ['SENDING'],
    event: 'send_failed',
    to: 'WAITING',
    actors: SYS,
    note: 'the write provably did not happen: the recipient is unreachable; written again after a growing back-off, no budget spent',
  },
  {
    from: ['SENDING'],
    event: 'send_gave_up',
    to: 'FAILED',
    actors: SYS,
    note: 'the recipient stayed unreachable for the give-up time (BATON_UNREACHABLE_GIVE_UP_MS)',
  },
  { from: ['SENDING'], event: 'reply_lost', to: 'UNCERTAIN', actors: SYS, note: 'the write may have landed; never resent blindly' },
  {
    from: ['SENDING'],
    event: 'lock_lost',
    to: 'WAITING',
    actors: SYS,
    note: 'the turn lock was lost between the reservation and the write: nothing was written, no budget spent',
  },
  {
    from: ['UNCERTAIN'],
    event: 'unsent_proven',
    to: 'WAITING',
    actors: SYS,
    note: 'the worker that reserved the write proves it never made it (it lost its lock first), after a new lock holder had marked it UNCERTAIN',
  },
  { from: ['ACCEPTED'], event: 'turn_started', to: 'RUNNING', actors: SYS, note: 'the recipient is working on the turn' },
  { from: ['ACCEPTED', 'RUNNING'], event: 'turn_returned', to: 'RETURNED', actors: SYS, note: 'the turn finished with a result' },
  {
    from: ['ACCEPTED', 'RUNNING'],
    event: 'turn_failed_resend',
    to: 'WAITING',
    actors: SYS,
    note: 'the turn errored; resent with a new request id (at most twice)',
  },
  {
    from: ['ACCEPTED', 'RUNNING'],
    event: 'turn_failed',
    to: 'FAILED',
    actors: SYS,
    note: 'the turn errored and the resend budget is spent',
  },
  {
    from: ['ACCEPTED', 'RUNNING'],
    event: 'turn_interrupted_resend',
    to: 'WAITING',
    actors: SYS,
    note: 'the turn was interrupted; resent once, later',
  },
  {
    from: ['ACCEPTED', 'RUNNING'],
    event: 'turn_interrupted',
    to: 'FAILED',
    actors: SYS,
    note: 'interrupted again, or the work is no longer open',
  },
  {
    from: ['ACCEPTED', 'RUNNING'],
    event: 'unobservable',
    to: 'UNCERTAIN',
    actors: SYS,
    note: 'nobody could observe the accepted turn for too long',
  },
  { from: ['UNCERTAIN'], event: 'observed_accepted', to: 'ACCEPTED', actors: SYS, note: 'found in history: accepted' },
  {
    from: ['UNCERTAIN'],
    event: 'observed_running',
    to: 'RUNNING',
    actors: SYS,
    note: 'found in history: it ran (how it ended is then handled as for any turn)',
  },
  { from: ['UNCERTAIN'], event: 'observed_returned', to: 'RETURNED', actors: SYS, note: 'found in history: finished' },
  { from: ['UNCERTAIN'], event: 'scan_missed', to: 'UNCERTAIN', actors: SYS, note: 'a complete history scan did not find the request id' },
  {
    from: ['UNCERTAIN'],
    event: 'proven_absent',
    to: 'CANCELLED',
    actors: SYS,
    note: 'three complete scans over an hour prove it never arrived; not resent',
  },
  {
    from: ['UNCERTAIN', 'ACCEPTED', 'RUNNING'],
    event: 'released',
    to: 'CANCELLED',
    actors: ['operator', 'sender'],
    note: 'a person knows how it ended; nothing is resent',
  },
  {
    from: ['WAITING', 'BUSY', 'HELD', 'OWNER_REJECTED'],
    event: 'cancelled',
    to: 'CANCELLED',
    actors: ['sender', 'operator'],
    note: 'withdrawn before any write',
  },
  { from: ['ACCEPTED'], event: 'claim_cancelled', to: 'CANCELLED', actors: ['sender'], note: 'pull-claimed work withdrawn by its sender' },
  {
    from: ['WAITING', 'BUSY', 'HELD', 'RETURNED'],
    event: 'acknowledged',
    to: 'ACKNOWLEDGED',
    actors: ['recipient'],
    note: 'a plain message marked read; no turn needed',
  },
  { from: ['WAITING', 'BUSY'], event: 'claimed', to: 'ACCEPTED', actors: ['recipient'], note: 'a pull receiver took the work' },
  {
    from: ['ACCEPTED'],
    event: 'claim_released',
    to: 'WAITING',
    actors: ['recipient', 'system'],
    note: 'a pull claim ended without a result (failed return, lost lease)',
  },
  {
    from: ['ACCEPTED', 'RUNNING'],
    event: 'work_returned',
    to: 'RETURNED',
    actors: ['recipient'],
    note: 'a pull receiver returned its result',
  },
  { from: ['RETURNED'], event: 'revision_requested', to: 'WAITING', actors: ['sender'], note: 'sent back to the recipient with a note' },
];

const INDEX = new Map<string, TransitionRule>();
for (const rule of TRANSITIONS) {
  for (const from of rule.from) {
    const key = `${from ?? 'null'}|${rule.event}`;
    if (INDEX.has(key)) throw new Error(`transition table has two rules for ${key}`);
    INDEX.set(key, rule);
  }
}

/** The rule for (from, event), or undefined when the table has none. */
export function findTransition(from: FromState, event: DeliveryEvent): TransitionRule | undefined {
  return INDEX.get(`${from ?? 'null'}|${event}`);
}

/**
 * Decides a move. Pure: reads only the table.
 * @returns the state the delivery moves to.
 * @throws BatonError `invalid_transition` when the table has no such move,
 *   `transition_not_permitted` when this kind of actor may not cause it.
 */
export function planTransition(from: FromState, event: DeliveryEvent, actor: ActorKind): DeliveryState {
  const rule = findTransition(from, event);
  if (!rule) {
    throw new BatonError('invalid_transition', `a handoff in ${from ?? 'no state'} cannot take the event ${event}`, {
      from,
      event,
    });
  }
  if (!rule.actors.includes(actor)) {
    throw new BatonError('transition_not_permitted', `the ${actor} may not cause ${event}`, { from, event, actor });
  }
  return rule.to;
}

/** Every (from, to) edge of the table, for the diagram and its test. */
export function transitionEdges(): Array<{ from: FromState; event: DeliveryEvent; to: DeliveryState }> {
  return TRANSITIONS.flatMap((r) => r.from.map((from) => ({ from, event: r.event, to: r.to })));
}

export const ALL_FROM_STATES: readonly FromState[] = [null, ...DELIVERY_STATES];
