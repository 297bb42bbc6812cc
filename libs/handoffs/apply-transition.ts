import { BatonError } from '../domain/errors.ts';
import type { DeliveryState } from '../domain/delivery-states.ts';
import { isSettled } from '../domain/delivery-states.ts';
import { planTransition, type DeliveryEvent } from '../domain/transitions.ts';
import type { AttemptInsert, AttemptUpdate, HandoffCounter, HandoffPatch, HandoffRepository } from '../db/handoff-repository.ts';
import type { Clock } from '../domain/clock.ts';
import type { Actor } from './ports.ts';

/** The part of a handoff a transition reads and returns: its state, revision and counters. */
export interface Moveable {
  readonly id: string;
  readonly deliveryState: DeliveryState;
  readonly revision: number;
  readonly attemptCount: number;
  readonly refusals: number;
  readonly errorResends: number;
  readonly interruptResends: number;
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
}

/**
 * THE way a handoff's delivery state changes. Plans the move with the transition table, then
 * writes it as one compare-and-set statement that also appends the event row (and any attempt
 * change). Settled states stamp `settled_at`.
 * @returns the handoff as it now is (state, revision + 1, counters bumped).
 * @throws BatonError invalid_transition / transition_not_permitted (refused by the table),
 *   stale_revision (someone moved it first; nothing written), handoff_not_found.
 */
export async function applyTransition(
  deps: { readonly handoffs: HandoffRepository; readonly clock: Clock },
  h: Moveable,
  event: DeliveryEvent,
  actor: Actor,
  opts: TransitionOptions = {},
): Promise<Moveable> {
  const to = planTransition(h.deliveryState, event, actor.kind);
  const at = deps.clock.now();
  const patch: HandoffPatch = { ...opts.patch };
  if (isSettled(to) && patch.settledAt === undefined) patch.settledAt = at;
  if (!isSettled(to) && isSettled(h.deliveryState)) patch.settledAt = null;
  if (opts.notBeforeInMs !== undefined) patch.notBefore = new Date(at.getTime() + opts.notBeforeInMs);
  const revision = await deps.handoffs.transition({
    handoffId: h.id,
    from: h.deliveryState,
    to,
    expectRevision: h.revision,
    at,
    event: { event, actorKind: actor.kind, actorId: actor.id, tokenId: actor.tokenId ?? null, reason: opts.reason ?? null, detail: opts.detail },
    patch,
    ...(opts.increment ? { increment: opts.increment } : {}),
    ...(opts.insertAttempt ? { insertAttempt: opts.insertAttempt } : {}),
    ...(opts.updateAttempt ? { updateAttempt: opts.updateAttempt } : {}),
  });
  if (revision === null) {
    const current = await deps.handoffs.findById(h.id);
    if (!current) throw new BatonError('handoff_not_found', `handoff ${h.id} does not exist`);
    throw new BatonError('stale_revision', `handoff ${h.id} changed since revision ${h.revision}; it is now ${current.deliveryState} at revision ${current.revision}`, {
      expectedRevision: h.revision,
      currentRevision: current.revision,
      currentState: current.deliveryState,
    });
  }
  const bump = (name: HandoffCounter) => (opts.increment?.includes(name) ? 1 : 0);
  return {
    id: h.id,
    deliveryState: to,
    revision,
    attemptCount: h.attemptCount + bump('attemptCount'),
    refusals: h.refusals + bump('refusals'),
    errorResends: h.errorResends + bump('errorResends'),
    interruptResends: h.interruptResends + bump('interruptResends'),
  };
}
