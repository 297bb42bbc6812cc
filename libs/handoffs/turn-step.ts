/**
 * A delivery step and the moves it writes: what handling one piece of work leads to (`Step`), and
 * the one way a delivery run records moves (`move`).
 */
import { hasErrorCode } from '../domain/errors.ts';
import { type DeliveryTarget } from '../adapters/provider-adapter.ts';
import type { WorkItem } from '../db/handoff-repository.ts';
import type { HandoffRecord } from '../db/records.ts';
import { applyTransitions, type HandoffAtRevision, type TransitionGuard } from './apply-transition.ts';
import type { DispatchDeps } from './dispatch-deps.ts';
import { SYSTEM_ACTOR } from './ports.ts';
import { type Move } from './turn-end-moves.ts';

/** What recording a move touches. */
export type MoveDeps = Pick<DispatchDeps, 'handoffs' | 'clock' | 'events' | 'logger' | 'workerId'>;

/**
 * Result of handling one piece of work: go on with the queue, pause it, or stop. `next` may
 * carry the head of the queue as the statement that ended the turn found it (`null`: nothing
 * more; absent: look it up). `moved`: the handoff this step moved, when it did; `dueInMs`: its
 * moves made it wait before it goes out again (a resend delay, a busy session's back-off), so a
 * wake-up is due then (a later step that moves the same handoff again replaces that time).
 */
export type Step =
  { kind: 'next'; next?: WorkItem | null; moved?: string; dueInMs?: number } | { kind: 'pause'; retryInMs: number } | { kind: 'stopped' };

export const NEVER = new AbortController().signal;

export function atRevision(h: HandoffRecord): HandoffAtRevision {
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
export async function move(
  deps: MoveDeps,
  h: HandoffAtRevision,
  moves: readonly Move[],
  guard: TransitionGuard = {},
): Promise<(HandoffAtRevision & { readonly nextWork?: WorkItem | null }) | null> {
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
