import type { EarlierRequests, WithdrawnRequest } from '../adapters/provider-adapter.ts';
import type { DeliveryState } from '../domain/delivery-states.ts';
import type { SessionTurn, SessionTurnRepository } from '../db/session-turn-repository.ts';
import type { HandoffRecord } from '../db/records.ts';
import { DELIVERY_WORKER_DEFAULTS } from '../config/component-defaults.ts';

/** A reason longer than this is cut: the notice names, it does not retell. */
const REASON_MAX = 240;

/** Attempt statuses of a turn that reached the session and got no answer there. */
const UNANSWERED = new Set(['failed', 'interrupted']);
/** Delivery states in which Baton has given a handoff up: its sender was told it ended. */
const GIVEN_UP = new Set<DeliveryState>(['FAILED', 'CANCELLED', 'UNAVAILABLE']);
/** Delivery states in which a handoff waits to be sent again. */
const TO_BE_RESENT = new Set<DeliveryState>(['WAITING', 'BUSY', 'HELD', 'OWNER_REJECTED']);

const bounded = (text: string) => (text.length > REASON_MAX ? `${text.slice(0, REASON_MAX - 1)}…` : text);

function named(t: SessionTurn, reason: string): WithdrawnRequest {
  return { requestId: t.requestId, handoffId: t.handoffId, title: t.title, reason: bounded(reason) };
}

/**
 * What a new turn must say about earlier Baton requests in its session, from the turns Baton
 * wrote there (newest first). This handoff's own turns that got no answer are what the turn
 * replaces, however far back. Another handoff's are named only from after the newest answered
 * turn (`returned`: the model has answered after them, and that turn already named them):
 * withdrawn when Baton gave it up (FAILED, CANCELLED: released mid-turn included), pending when
 * it waits to be sent again. The rest (an answer still possible: UNCERTAIN, running) is not
 * named. Pure, so a test can walk every case.
 */
export function earlierRequestsOf(turns: readonly SessionTurn[], handoffId: string, requestId: string): EarlierRequests {
  const replaces: string[] = [];
  const withdrawn: WithdrawnRequest[] = [];
  const pending: WithdrawnRequest[] = [];
  let answered = false;
  for (const t of turns) {
    if (t.requestId === requestId) continue;
    if (t.attemptStatus === 'returned') answered = true;
    const released = t.attemptStatus === 'cancelled' && t.deliveryState === 'CANCELLED';
    if (!UNANSWERED.has(t.attemptStatus) && !released) continue;
    if (t.handoffId === handoffId) {
      if (!released) replaces.push(t.requestId);
    } else if (answered) {
      continue;
    } else if (GIVEN_UP.has(t.deliveryState)) {
      withdrawn.push(named(t, `${t.deliveryState}: ${t.deliveryDetail ?? t.attemptError ?? 'given up'}`));
    } else if (TO_BE_RESENT.has(t.deliveryState)) {
      pending.push(named(t, `its turn ended in an error (${t.attemptError ?? 'no detail'}); it waits to be sent again`));
    }
  }
  // Oldest first, as they stand in the session.
  return { replaces: replaces.reverse(), withdrawn: withdrawn.reverse(), pending: pending.reverse() };
}

/**
 * The earlier requests a turn of `record` (request `requestId`) carries, or undefined when its
 * provider's sessions do not keep failed prompts (a command's process, a webhook's request end
 * with the turn) or nothing is to be said. One read of the session's turns.
 */
export async function earlierRequestsFor(
  deps: { readonly sessionTurns: Pick<SessionTurnRepository, 'newestTurns'> },
  record: Pick<HandoffRecord, 'id' | 'recipientId' | 'deliveryTarget'>,
  requestId: string,
  sessionKeepsPrompts: boolean,
): Promise<EarlierRequests | undefined> {
  if (!sessionKeepsPrompts || !record.recipientId) return undefined;
  const turns = await deps.sessionTurns.newestTurns(
    record.recipientId,
    record.deliveryTarget,
    DELIVERY_WORKER_DEFAULTS.earlierTurnsLookBack,
  );
  const earlier = earlierRequestsOf(turns, record.id, requestId);
  return earlier.replaces.length + earlier.withdrawn.length + earlier.pending.length > 0 ? earlier : undefined;
}
