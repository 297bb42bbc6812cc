import { BatonError } from '../domain/errors.ts';
import type { DeliveryState } from '../domain/delivery-states.ts';
import { isSettled } from '../domain/delivery-states.ts';
import { planTransition, type DeliveryEvent } from '../domain/transitions.ts';
import {
  WORK_TRANSITIONS,
  planWorkMove,
  workMoveWhenDeliverySettles,
  type WorkActor,
  type WorkEvent,
  type WorkState,
} from '../domain/work-states.ts';
import type {
  AttemptInsert,
  AttemptUpdate,
  HandoffCounter,
  HandoffPatch,
  HandoffRepository,
  HeadReservation,
  TransitionStep,
  TransitionWrite,
  WorkItem,
} from '../db/handoff-repository.ts';
import type { Clock } from '../domain/clock.ts';
import type { Actor, EventPublisher } from './ports.ts';

/** The part of a handoff a transition reads and returns: its state, revision and counters. */
export interface HandoffAtRevision {
  readonly id: string;
  readonly deliveryState: DeliveryState;
  readonly revision: number;
  readonly attemptCount: number;
  readonly refusals: number;
  readonly errorResends: number;
  readonly interruptResends: number;
}

/**
 * How an applied transition can also answer "what is next for this recipient?" in the same
 * statement (TransitionWrite.thenNextWork): `nextWork` is then set on the result.
 */
export interface TransitionGuard {
  readonly anyRevision?: boolean;
  /** `reserve`: the statement also reserves that head's attempt when it may (HeadReservation). */
  readonly thenNextWork?: { readonly recipientId: string; readonly deployment: string; readonly reserve?: HeadReservation };
}

export interface TransitionOptions {
  reason?: string | null;
  detail?: unknown;
  patch?: HandoffPatch;
  increment?: readonly HandoffCounter[];
  insertAttempt?: AttemptInsert;
  updateAttempt?: AttemptUpdate;
  /** Sets not_before to the transition's own time plus this many milliseconds. */
  notBeforeInMs?: number;
  /**
   * Also moves the recipient's other WAITING handoffs with this event (planned with the table,
   * as the same actor), in the same statement: used when a turn starts, so what waits behind
   * it is visibly BUSY.
   */
  moveOthers?: { recipientId: string; event: DeliveryEvent; reason: string };
  /**
   * Also moves the handoff's work, if it is in a state from which the work table lets this
   * actor take `event` (planned here), in the same statement. Without it, a move that ends the
   * delivery where nobody will do the work (CANCELLED, UNAVAILABLE) settles the work anyway:
   * `workMoveWhenDeliverySettles` in libs/domain/work-states.ts.
   */
  moveWork?: { current: WorkState | null; event: WorkEvent; role: WorkActor; reason: string };
}

type Deps = { readonly handoffs: HandoffRepository; readonly clock: Clock; readonly events: EventPublisher };

/**
 * The work move that goes with a delivery ending in `to`, whatever caused it (a release, a
 * proven absence, a removed recipient): work nobody will do is settled in the same statement,
 * from whichever active state it is in (the statement checks; a plain message has none).
 */
function settleWork(to: DeliveryState, actor: Actor, reason: string | null): TransitionWrite['moveWork'] {
  const rule = workMoveWhenDeliverySettles(to);
  if (!rule) return undefined;
  const event = {
    event: rule.event,
    actorKind: actor.kind,
    actorId: actor.id,
    tokenId: actor.tokenId ?? null,
    reason: reason ?? `the delivery ended ${to}`,
  };
  return { from: rule.from, to: rule.to, event, result: rule.result };
}

/**
 * THE way a handoff's delivery state changes. Plans the move with the transition table, then
 * writes it as one compare-and-set statement that also appends the event row (and any attempt
 * change). Settled states stamp `settled_at` and release the duplicate guard.
 * @returns the handoff as it now is (state, revision + 1, counters bumped).
 * @throws BatonError invalid_transition / transition_not_permitted (refused by the table),
 *   stale_revision (someone moved it first; nothing written), handoff_not_found.
 */
export function applyTransition(
  deps: Deps,
  h: HandoffAtRevision,
  event: DeliveryEvent,
  actor: Actor,
  opts: TransitionOptions = {},
): Promise<HandoffAtRevision> {
  return applyTransitions(deps, h, [[event, opts]], actor);
}

/**
 * Several moves in a row, written as one statement: each is planned with the table from the
 * state the previous one reached, and each gets its own event row and revision, exactly as if
 * applied one by one (used when a turn is seen to have been accepted, run and returned at
 * once). Options merge in order: later patches win, increments add up, attempt changes merge.
 */
export async function applyTransitions(
  deps: Deps,
  h: HandoffAtRevision,
  moves: ReadonlyArray<readonly [DeliveryEvent, TransitionOptions?]>,
  actor: Actor,
  guard: TransitionGuard = {},
): Promise<HandoffAtRevision & { readonly nextWork?: WorkItem | null }> {
  const at = deps.clock.now();
  const steps: TransitionStep[] = [];
  const patch: HandoffPatch = {};
  const increment: HandoffCounter[] = [];
  let insertAttempt: AttemptInsert | undefined;
  let updateAttempt: AttemptUpdate | undefined;
  let moveOthers: TransitionWrite['moveOthers'];
  let moveWork: TransitionWrite['moveWork'];
  let state = h.deliveryState;
  for (const [event, opts = {}] of moves) {
    const to = planTransition(state, event, actor.kind);
    steps.push({
      from: state,
      to,
      event: {
        event,
        actorKind: actor.kind,
        actorId: actor.id,
        tokenId: actor.tokenId ?? null,
        reason: opts.reason ?? null,
        detail: opts.detail,
      },
    });
    // An UNCERTAIN handoff's not_before is when its history is scanned next; it means nothing
    // once the handoff leaves UNCERTAIN (a proof that it was never written sends it again now).
    if (state === 'UNCERTAIN' && to !== 'UNCERTAIN') patch.notBefore = null;
    Object.assign(patch, opts.patch);
    if (opts.notBeforeInMs !== undefined) patch.notBefore = new Date(at.getTime() + opts.notBeforeInMs);
    increment.push(...(opts.increment ?? []));
    insertAttempt = opts.insertAttempt ?? insertAttempt;
    const wk = opts.moveWork;
    if (wk && wk.current !== null) {
      // Every work state from which the table allows this move: the statement re-checks it.
      const from = WORK_TRANSITIONS.filter((r) => r.event === wk.event && r.actors.includes(wk.role)).flatMap((r) => r.from);
      const rule = planWorkMove(wk.current, wk.event, wk.role);
      moveWork = {
        from,
        to: rule.to,
        event: { event: wk.event, actorKind: actor.kind, actorId: actor.id, tokenId: actor.tokenId ?? null, reason: wk.reason },
        result: rule.result,
      };
    } else if (wk === undefined) {
      moveWork = settleWork(to, actor, opts.reason ?? null) ?? moveWork;
    }
    if (opts.moveOthers) {
      const q = opts.moveOthers;
      moveOthers = {
        recipientId: q.recipientId,
        from: 'WAITING',
        to: planTransition('WAITING', q.event, actor.kind),
        event: { event: q.event, actorKind: actor.kind, actorId: actor.id, reason: q.reason },
      };
    }
    if (opts.updateAttempt) {
      const prev: Partial<AttemptUpdate> = updateAttempt ?? {};
      const u = opts.updateAttempt;
      updateAttempt = {
        ...prev,
        ...u,
        accepted: Boolean(prev.accepted || u.accepted),
        finished: Boolean(prev.finished || u.finished),
        observed: Boolean(prev.observed || u.observed),
        absentScan: Boolean(prev.absentScan || u.absentScan),
      };
    }
    state = to;
  }
  if (isSettled(state)) {
    if (patch.settledAt === undefined) patch.settledAt = at;
    // A settled handoff no longer makes identical sends duplicates of it.
    patch.inProgressKey = null;
  } else if (isSettled(h.deliveryState)) {
    patch.settledAt = null;
  }
  const written = await deps.handoffs.transition({
    handoffId: h.id,
    steps,
    expectRevision: guard.anyRevision ? null : h.revision,
    at,
    patch,
    increment,
    ...(insertAttempt ? { insertAttempt } : {}),
    ...(updateAttempt ? { updateAttempt } : {}),
    ...(moveOthers ? { moveOthers } : {}),
    ...(moveWork ? { moveWork } : {}),
    ...(guard.thenNextWork ? { thenNextWork: { ...guard.thenNextWork, now: at } } : {}),
  });
  if (written === null) {
    if (guard.anyRevision) throw new BatonError('stale_revision', `handoff ${h.id} is no longer ${h.deliveryState}`);
    const current = await deps.handoffs.findById(h.id);
    if (!current) throw new BatonError('handoff_not_found', `handoff ${h.id} does not exist`);
    throw new BatonError(
      'stale_revision',
      `handoff ${h.id} changed since revision ${h.revision}; it is now ${current.deliveryState} at revision ${current.revision}`,
      {
        expectedRevision: h.revision,
        currentRevision: current.revision,
        currentState: current.deliveryState,
      },
    );
  }
  deps.events.published(written.eventIds);
  const revision = written.revision;
  const bumps = (name: HandoffCounter) => increment.filter((c) => c === name).length;
  return {
    id: h.id,
    deliveryState: state,
    revision,
    attemptCount: h.attemptCount + bumps('attemptCount'),
    refusals: h.refusals + bumps('refusals'),
    errorResends: h.errorResends + bumps('errorResends'),
    interruptResends: h.interruptResends + bumps('interruptResends'),
    ...(written.nextWork !== undefined ? { nextWork: written.nextWork } : {}),
  };
}
