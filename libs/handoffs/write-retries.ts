import {
  busyRetryDelayMs,
  eventAfterNotSent,
  unreachableRetryDelayMs,
  unreachableSinceMs,
  type DeliveryWindows,
} from '../domain/delivery-policy.ts';
import type { AttemptHistory } from '../db/attempt-history-repository.ts';
import type { Clock } from '../domain/clock.ts';
import type { CoreDeps } from './ports.ts';
import type { Move } from './turn-end-moves.ts';

/**
 * The writes that did not become a turn, and when they go out again (libs/domain/delivery-policy.ts
 * holds the schedules): a write the session answered busy waits longer with each busy answer in a
 * row; a write that never left Baton (`not_sent`) holds the handoff WAITING while the recipient
 * stays unreachable, up to `DeliveryWindows.unreachableGiveUpMs`, then fails it with a reason that
 * says how long and what was tried. Neither spends an attempt budget. Both counts come from the
 * handoff's attempts (their statuses and start times), read once per write again and never for
 * a handoff's first write: a normal turn costs no extra statement.
 */

/** What the earlier writes of a handoff came to; every count is zero before its first write. */
export type WriteHistory = AttemptHistory;

const FIRST_WRITE: WriteHistory = Object.freeze({ taken: 0, busyInRow: 0, unsentInRow: 0, unsentSince: null, unsentLast: null });

/** The earlier writes of the handoff whose attempt `attemptNumber` is being written (no read for attempt 1). */
export function writeHistory(deps: Pick<CoreDeps, 'attemptHistory'>, handoffId: string, attemptNumber: number): Promise<WriteHistory> {
  return attemptNumber <= 1 ? Promise.resolve(FIRST_WRITE) : deps.attemptHistory.before(handoffId, attemptNumber);
}

/**
 * `TurnRequest.attempt`: the how-manieth time the recipient is handed this handoff to act on.
 * Writes it answered busy and writes that never left Baton did nothing there, so they do not
 * count; every other earlier write does (it ran, failed, was refused, or its answer was lost).
 */
export function turnAttempt(history: WriteHistory): number {
  return history.taken + 1;
}

interface RetryDeps {
  readonly clock: Clock;
  readonly windows: Pick<DeliveryWindows, 'unreachableGiveUpMs'>;
  readonly timing: { readonly busyRetryMs: number; readonly unreachableRetryMs: number };
}

/** How long a handoff whose write was just answered busy waits (`retryAfterMs`: the recipient's own wait). */
export function busyRetryInMs(deps: Pick<RetryDeps, 'timing'>, history: WriteHistory, retryAfterMs?: number): number {
  return busyRetryDelayMs(history.busyInRow, retryAfterMs, deps.timing.busyRetryMs);
}

/** The move that records a busy answer to the write itself, and how long the handoff then waits. */
export function busyAtWrite(
  deps: Pick<RetryDeps, 'timing'>,
  history: WriteHistory,
  attemptId: string,
  detail: string,
  retryAfterMs?: number,
): { move: Move; retryInMs: number } {
  const retryInMs = busyRetryInMs(deps, history, retryAfterMs);
  const busyInRow = history.busyInRow + 1;
  return {
    retryInMs,
    move: [
      'session_busy',
      {
        reason: detail,
        detail: { busyInRow, retryInMs },
        notBeforeInMs: retryInMs,
        updateAttempt: { id: attemptId, status: 'busy', error: detail, finished: true },
      },
    ],
  };
}

/**
 * The move that records a write that never left Baton (`error`: why), started at `wroteAt`.
 * `retryInMs` null: the recipient has been unreachable past the give-up time and the handoff fails.
 */
export function notSent(
  deps: RetryDeps,
  history: WriteHistory,
  attemptId: string,
  error: string,
  wroteAt: Date,
): { move: Move; retryInMs: number | null } {
  const now = deps.clock.now().getTime();
  const since = unreachableSinceMs(history.unsentSince?.getTime() ?? null, history.unsentLast?.getTime() ?? null, wroteAt.getTime());
  const unreachableForMs = Math.max(0, now - since);
  // The writes this count covers (a long pause restarts it: unreachableSinceMs).
  const writes = since === wroteAt.getTime() ? 1 : history.unsentInRow + 1;
  const giveUpMs = deps.windows.unreachableGiveUpMs;
  const attempt = { id: attemptId, status: 'not_sent' as const, error, finished: true };
  if (eventAfterNotSent(unreachableForMs, deps.windows) === 'send_gave_up') {
    const reason =
      `gave up: the recipient was unreachable for ${duration(unreachableForMs)} (${writes} ${writes === 1 ? 'write' : 'writes'} since ${new Date(since).toISOString()}, ` +
      `none of which left Baton; the last: ${error}); the give-up time is ${duration(giveUpMs)} (BATON_UNREACHABLE_GIVE_UP_MS)`;
    return {
      retryInMs: null,
      move: [
        'send_gave_up',
        {
          reason,
          patch: { deliveryDetail: reason },
          detail: { unreachableForMs, writes, since: new Date(since).toISOString() },
          updateAttempt: attempt,
        },
      ],
    };
  }
  const retryInMs = unreachableRetryDelayMs(history.unsentInRow, since + giveUpMs - now, deps.timing.unreachableRetryMs);
  const giveUpAt = new Date(since + giveUpMs).toISOString();
  const reason =
    `the recipient is unreachable (${error}); nothing left Baton, no attempt spent: ${writes} ${writes === 1 ? 'write' : 'writes'} in ${duration(unreachableForMs)}, ` +
    `the next in about ${duration(retryInMs)}, giving up at ${giveUpAt}`;
  return {
    retryInMs,
    move: [
      'send_failed',
      {
        reason,
        patch: { deliveryDetail: reason },
        detail: { unreachableForMs, writes, retryInMs, giveUpAt },
        notBeforeInMs: retryInMs,
        updateAttempt: attempt,
      },
    ],
  };
}

/** A duration as people read it: 850 ms, 12.5 s, 4 min 10 s, 2 h 5 min. */
function duration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Math.round(ms / 100) / 10} s`;
  const s = Math.round(ms / 1_000);
  if (s < 3_600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  const min = Math.round(s / 60);
  return `${Math.floor(min / 60)} h${min % 60 ? ` ${min % 60} min` : ''}`;
}
