/**
 * A delivery step and the moves it writes: what handling one piece of work leads to (`Step`), and
 * the one way deliver-turn.ts and follow-turn.ts record moves (`move`, and `endTurn` for the end of
 * a turn, which also reads and may reserve what comes next).
 */
import { hasErrorCode } from '../domain/errors.ts';
import { isSettled, type DeliveryState } from '../domain/delivery-states.ts';
import { planTransition } from '../domain/transitions.ts';
import { type HeadReserver } from './reserve-head.ts';
import { type DeliveryTarget } from '../adapters/provider-adapter.ts';
import type { WorkItem } from '../db/handoff-repository.ts';
import type { HandoffRecord } from '../db/records.ts';
import { applyTransitions, type Moveable, type TransitionGuard } from './apply-transition.ts';
import type { DispatchDeps, RunSlot, TurnLockHandle } from './dispatch-deps.ts';
import { SYSTEM_ACTOR } from './ports.ts';
import { type Move } from './turn-end-moves.ts';

/**
 * Result of handling one piece of work: go on with the queue, pause it, or stop. `next` may
 * carry the head of the queue as the statement that ended the turn found it (`null`: nothing
 * more; absent: look it up). `moved`: the handoff this step moved, when it did; `dueInMs`: its
 * moves made it wait before it goes out again (a resend delay, a busy session's back-off), so a
 * wake-up is due then (a later step that moves the same handoff again replaces that time).
 */
export type Step = { kind: 'next'; next?: WorkItem | null; moved?: string; dueInMs?: number } | { kind: 'pause'; retryInMs: number } | { kind: 'stopped' };

/**
 * Going on after `moves` were written (`moved` null: someone else moved the handoff first),
 * with the head of the queue when the statement that ended the turn read it, but only after a
 * settled end: that head leaves the moved handoff out, so a resend (which may be next) or a
 * turn that became UNCERTAIN (which its snapshot still saw live) has it looked up anew.
 */
function nextStep(moved: (Moveable & { readonly nextWork?: WorkItem | null }) | null, moves: readonly Move[]): Step {
  const again = moved !== null && !isSettled(moved.deliveryState);
  const step: Step = moved?.nextWork !== undefined && !again ? { kind: 'next', next: moved.nextWork } : { kind: 'next' };
  if (!moved) return step;
  const delays = moves.flatMap(([, o]) => (o?.notBeforeInMs !== undefined ? [o.notBeforeInMs] : []));
  return delays.length > 0 ? { ...step, moved: moved.id, dueInMs: Math.min(...delays) } : { ...step, moved: moved.id };
}

/**
 * Ends a turn with `moves` in one statement that also reads the recipient's next work and,
 * when the run's HeadReserver may, reserves it (the end of one turn, the choice of the next and
 * its reservation: one round trip). It reserves only after a settled end: the session is then
 * between turns, and only then is the head it read kept (nextStep).
 */
export async function endTurn(deps: DispatchDeps, h: Moveable, moves: readonly Move[], record: HandoffRecord, lock: WriteLock): Promise<Step> {
  if (!record.recipientId) return nextStep(await move(deps, h, moves), moves);
  const final = moves.reduce<DeliveryState>((state, [event]) => planTransition(state, event, 'system'), h.deliveryState);
  const reserve = isSettled(final) ? await lock.heads?.plan('turn-end') : undefined;
  const guard: TransitionGuard = { thenNextWork: { recipientId: record.recipientId, deployment: deps.deployment, ...(reserve ? { reserve } : {}) } };
  const moved = await move(deps, h, moves, guard);
  lock.heads?.settled(reserve, moved?.nextWork);
  return nextStep(moved, moves);
}

export const NEVER = new AbortController().signal;

export function moveable(h: HandoffRecord): Moveable {
  return {
    id: h.id,
    deliveryState: h.deliveryState,
    revision: h.revision,
    attemptCount: h.attemptCount,
    refusals: h.refusals,
    errorResends: h.errorResends,
    interruptResends: h.interruptResends,
  };
}

/**
 * Applies moves as the worker (one statement for all of them). A stale revision means someone
 * else moved the handoff first (a release by a person, a reconciler): not an error here, the
 * caller simply moves on.
 */
export async function move(deps: DispatchDeps, h: Moveable, moves: readonly Move[], guard: TransitionGuard = {}): Promise<(Moveable & { readonly nextWork?: WorkItem | null }) | null> {
  try {
    return await applyTransitions(deps, h, moves, { ...SYSTEM_ACTOR, id: deps.workerId }, guard);
  } catch (err) {
    if (hasErrorCode(err, 'stale_revision') || hasErrorCode(err, 'handoff_not_found')) {
      deps.logger.debug({ handoffId: h.id, event: moves[0]?.[0] }, 'handoff moved by someone else; skipping');
      return null;
    }
    throw err;
  }
}

/** Plain messages are always "open" for delivery; work stops being open once closed, cancelled or expired. */
export function isWorkOpen(h: HandoffRecord): boolean {
  return h.workState === null || h.workState === 'open' || h.workState === 'claimed';
}

export function targetOf(item: WorkItem): DeliveryTarget {
  return {
    agentId: item.handoff.recipientId ?? '',
    handle: item.recipient?.handle ?? '',
    target: item.handoff.deliveryTarget,
    settings: item.recipient?.settings ?? {},
  };
}



/**
 * The turn lock a delivery runs under, as far as a write needs it, and the run's reservations
 * made together with a look at the head (absent: none; every reservation is its own statement).
 */
export type WriteLock = Pick<TurnLockHandle, 'fence' | 'stillHeld'> & { readonly heads?: HeadReserver } & Pick<RunSlot, 'follow'>;
