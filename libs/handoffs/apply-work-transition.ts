import { BatonError, assertNever } from '../domain/errors.ts';
import { planTransition, type ActorKind, type DeliveryEvent } from '../domain/transitions.ts';
import { planWorkMove, type WorkActor, type WorkEvent, type WorkResultEffect, type WorkState } from '../domain/work-states.ts';
import type { HandoffRecord } from '../db/records.ts';
import type { WorkMoved, WorkPatch, WorkRepository } from '../db/work-repository.ts';
import type { HandoffRepository } from '../db/handoff-repository.ts';
import type { Clock } from '../domain/clock.ts';
import type { EventPublisher } from './ports.ts';

/** What a work move touches: its one statement, the read-back when it is refused, the clock, the event publisher. */
export interface WorkMoveDeps {
  readonly handoffs: Pick<HandoffRepository, 'findById'>;
  readonly work: Pick<WorkRepository, 'move'>;
  readonly clock: Clock;
  readonly events: EventPublisher;
}

/** Who moves the work: their role for the work table, and how the event log names them. */
export interface WorkActorRef {
  readonly role: WorkActor;
  readonly handle: string | null;
  readonly tokenId?: string | null;
}

export interface WorkMoveOptions {
  reason?: string | null;
  detail?: unknown;
  patch?: WorkPatch;
  newAttempt?: boolean;
  /** The claim the writer holds: the move happens only while it is still current. */
  claimToken?: string;
  /** The delivery moves with the work (planned with the delivery table, same statement). */
  delivery?: DeliveryEvent;
  /**
   * A replayable request (a return): remembered under `claimToken` in the move's own statement,
   * so the move and the record of it commit together and a replay with the same claim token is
   * answered from it, also when this call's reply was lost after the commit.
   */
  remember?: { action: string; bodyHash: string };
}

const LOG_KIND: Record<WorkActor, ActorKind> = { sender: 'sender', recipient: 'recipient', claimant: 'recipient', system: 'system' };

/**
 * The result columns a move's rule sets (libs/domain/work-states.ts): the outcome of a return,
 * or nothing left of the last attempt's result when a new one starts. The caller's patch
 * supplies the result itself (summary, evidence) and cannot override the outcome.
 */
function resultPatch(effect: WorkResultEffect | undefined, at: Date): WorkPatch {
  switch (effect) {
    case undefined:
      return {};
    case 'succeeded':
    case 'failed':
      return { returnOutcome: effect, returnedAt: at };
    case 'cleared':
      return { returnOutcome: null, resultSummary: null, result: null, resultFactIds: [], returnedAt: null };
    default:
      return assertNever(effect, 'work result effect');
  }
}

/**
 * THE way a handoff's work state changes: plans the move with the work table (and, when the
 * delivery moves too, with the delivery table), then writes it as one compare-and-set on the
 * work revision, with the event rows.
 * @throws BatonError invalid_transition / transition_not_permitted (refused by a table),
 *   claim_lost (the claim is no longer the writer's), stale_revision (someone moved it first),
 *   handoff_not_found. Nothing is written in any of these cases.
 */
export async function applyWorkTransition(
  deps: WorkMoveDeps,
  h: HandoffRecord,
  event: WorkEvent,
  actor: WorkActorRef,
  opts: WorkMoveOptions = {},
): Promise<WorkMoved> {
  if (h.workState === null) throw new BatonError('not_work', `handoff ${h.id} is a plain message`);
  const from: WorkState = h.workState;
  const rule = planWorkMove(from, event, actor.role);
  const to = rule.to;
  const kind = LOG_KIND[actor.role];
  const at = deps.clock.now();
  const patch: WorkPatch = { ...opts.patch, ...resultPatch(rule.result, at) };
  const base = { actorKind: kind, actorId: actor.handle, tokenId: actor.tokenId ?? null };
  const delivery = opts.delivery
    ? {
        from: h.deliveryState,
        to: planTransition(h.deliveryState, opts.delivery, kind),
        expectRevision: h.revision,
        event: { event: opts.delivery, ...base, reason: opts.reason ?? null },
      }
    : undefined;
  const moved = await deps.work.move({
    handoffId: h.id,
    from,
    to,
    expectWorkRevision: h.workRevision,
    at,
    event: { event, ...base, reason: opts.reason ?? null, detail: opts.detail },
    patch,
    ...(opts.newAttempt ? { newAttempt: true } : {}),
    ...(opts.claimToken !== undefined ? { claimToken: opts.claimToken } : {}),
    ...(delivery ? { delivery } : {}),
    ...(opts.remember ? { remember: opts.remember } : {}),
  });
  if (moved) {
    deps.events.published(moved.eventIds);
    return moved;
  }
  const current = await deps.handoffs.findById(h.id);
  if (!current) throw new BatonError('handoff_not_found', `handoff ${h.id} does not exist`);
  if (opts.claimToken !== undefined && current.claimToken !== opts.claimToken) {
    throw new BatonError(
      'claim_lost',
      `the claim on handoff ${h.id} is no longer current (its lease ran out, or it was returned); nothing changed`,
    );
  }
  throw new BatonError(
    'stale_revision',
    `handoff ${h.id} changed since work revision ${h.workRevision}; its work is now ${current.workState} at revision ${current.workRevision}`,
    {
      expectedRevision: h.workRevision,
      currentRevision: current.workRevision,
      currentState: current.workState,
    },
  );
}
