import type { DeliveryState } from '../../domain/delivery-states.ts';
import type { ActorKind } from '../../domain/transitions.ts';
import type { WorkResultEffect } from '../../domain/work-states.ts';
import type { TurnUsage } from '../../domain/turn-usage.ts';
import type { AttemptStatus } from '../records.ts';
import type { HeadReservation } from './head-reservation.ts';
import type { WorkItem } from './next-work.ts';

/**
 * What a compare-and-set transition writes and answers: the contract between libs/handoffs
 * (applyTransition plans it) and the statement (build-transition.ts builds it, transition.ts runs it).
 */

export interface EventWrite {
  event: string;
  actorKind: ActorKind;
  actorId: string | null;
  tokenId?: string | null;
  reason?: string | null;
  detail?: unknown;
}

/** Columns a transition may also set; `undefined` leaves a column alone, `null` clears it. */
export interface HandoffPatch {
  deliveryDetail?: string | null;
  notBefore?: Date | null;
  resultSummary?: string | null;
  result?: unknown;
  settledAt?: Date | null;
  inProgressKey?: null;
}

export type HandoffCounter = 'attemptCount' | 'refusals' | 'errorResends' | 'interruptResends';

export interface AttemptInsert {
  id: string;
  number: number;
  requestId: string;
  workerId: string | null;
  deliveryTarget: string | null;
  /**
   * The reserving worker's turn-lock fencing number. The reservation raises the recipient's
   * fence (`agent_turn_fences`) to it in the same statement and is refused (nothing moves) when the agent
   * already saw a newer one: a worker that lost its lock cannot start a turn.
   */
  fence?: bigint;
}

export interface AttemptUpdate {
  id: string;
  status: AttemptStatus;
  error?: string | null;
  accepted?: boolean;
  finished?: boolean;
  observed?: boolean;
  /** A complete history scan missed the request id: count it (and remember the first). */
  absentScan?: boolean;
  /** What the runtime reported the turn used: sets the attempt's usage columns (a field it did not report is NULL). */
  usage?: TurnUsage;
}

/** One move of a chain: the state it leaves, the state it reaches, and its event row. */
export interface TransitionStep {
  from: DeliveryState;
  to: DeliveryState;
  event: EventWrite;
}

/** What a committed transition statement wrote: the new revision and its event rows' ids. */
export interface TransitionWritten {
  revision: number;
  eventIds: string[];
  /**
   * With `thenNextWork`: the head of the recipient's queue as the statement found it, the moved
   * handoff left out (null: nothing dispatchable or live). Undefined without it.
   */
  nextWork?: WorkItem | null;
}

export interface TransitionWrite {
  handoffId: string;
  /** One or more moves applied together; each gets its own event row and revision. */
  steps: readonly TransitionStep[];
  /** The revision the writer read; null only for moves that are conditional on the state alone. */
  expectRevision: number | null;
  at: Date;
  patch?: HandoffPatch;
  increment?: readonly HandoffCounter[];
  insertAttempt?: AttemptInsert;
  updateAttempt?: AttemptUpdate;
  /**
   * In the same statement, moves the recipient's other handoffs that are in `from` to `to`
   * (each with its own event row): the handoffs queued behind a turn that is starting.
   */
  moveOthers?: { recipientId: string; from: DeliveryState; to: DeliveryState; event: EventWrite };
  /**
   * In the same statement, reads the head of this recipient's queue (what `nextWork` would
   * answer after the move): the end of one turn and the choice of the next in one round trip.
   */
  thenNextWork?: { recipientId: string; now: Date; deployment: string; reserve?: HeadReservation };
  /**
   * In the same statement, moves the handoff's work when it is in one of `from` (and only
   * then), with its own event row: a push turn that returned a result returns the work; a
   * delivery that ended where nobody will do the work settles it. `result`: what the work
   * table says the move does to the attempt's result (undefined: left alone). A move out of
   * the claim always ends the claim token and lease.
   */
  moveWork?: { from: readonly string[]; to: string; event: EventWrite; result: WorkResultEffect | undefined };
}
