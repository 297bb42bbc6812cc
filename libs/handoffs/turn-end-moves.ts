import {
  errorResendDelayMs,
  eventAfterInterruption,
  eventAfterTurnError,
  refusalBudgetSpent,
  type DeliveryWindows,
} from '../domain/delivery-policy.ts';
import { assertNever } from '../domain/errors.ts';
import type { DeliveryEvent } from '../domain/transitions.ts';
import { FAILURE_HEADLINES } from '../domain/turn-failure.ts';
import { reportsUsage } from '../domain/turn-usage.ts';
import type { TurnEnd } from '../adapters/provider-adapter.ts';
import type { HandoffRecord } from '../db/records.ts';
import type { HandoffAtRevision, TransitionOptions } from './apply-transition.ts';

/**
 * How the end of a turn is recorded: the moves (and their resend rules) for each way a turn can
 * end, whoever saw it end (the worker following it, or the reconciler's history scan).
 */

/** One transition with its options, as applyTransitions takes a list of them. */
export type Move = readonly [DeliveryEvent, TransitionOptions?];

/** Ends after which nothing was done: the turn never "started", so no RUNNING step is recorded. */
export function didNothing(end: TurnEnd): boolean {
  return end.status === 'busy' || end.status === 'rejected' || end.status === 'unobservable';
}

/** The windows that say when a resend goes out. */
export type ResendWindows = Pick<DeliveryWindows, 'interruptResendDelayMs' | 'errorResendDelayMs'>;

/**
 * The moves that record how a turn ended (resend rules included). `windows`: how long an
 * interrupted turn, and an errored one, waits before it is resent. `busyRetryMs`: when a turn
 * that answered "busy, nothing done" is tried again (write-retries.ts: `busyRetryInMs`).
 */
export function endMoves(
  h: HandoffAtRevision,
  end: TurnEnd,
  attemptId: string,
  workOpen: boolean,
  workState: HandoffRecord['workState'],
  busyRetryMs: number,
  windows: ResendWindows,
): Move[] {
  const finished = { finished: true, observed: true } as const;
  // What the runtime reported the turn used goes with the attempt in the same statement.
  const usage =
    (end.status === 'returned' || end.status === 'failed' || end.status === 'interrupted') && reportsUsage(end.usage)
      ? { usage: end.usage }
      : {};
  switch (end.status) {
    case 'returned':
      return [
        [
          'turn_returned',
          {
            reason: end.result.summary.slice(0, 200),
            patch: { resultSummary: end.result.summary, result: end.result.output ?? null, deliveryDetail: null },
            updateAttempt: { id: attemptId, status: 'returned', ...finished, ...usage },
            // Work the turn was about is returned with the turn's result, unless the agent
            // already returned (or the sender closed) it explicitly.
            ...(workState === 'open' || workState === 'claimed'
              ? {
                  moveWork: {
                    current: workState,
                    event: 'returned' as const,
                    role: 'system' as const,
                    reason: 'the turn returned a result',
                  },
                }
              : {}),
          },
        ],
      ];
    case 'failed': {
      const event = eventAfterTurnError(h, end.failure);
      // A failure a resend cannot mend says so first, in the user's words; the runtime's own text follows.
      const reason = end.failure && end.failure.kind !== 'transient' ? `${FAILURE_HEADLINES[end.failure.kind]}: ${end.error}` : end.error;
      const resendInMs = event === 'turn_failed_resend' ? errorResendDelayMs(h.errorResends, end.failure, windows) : undefined;
      return [
        [
          event,
          {
            reason,
            patch: { deliveryDetail: reason },
            ...(end.failure || resendInMs !== undefined
              ? { detail: { ...(end.failure ? { failure: end.failure } : {}), ...(resendInMs !== undefined ? { resendInMs } : {}) } }
              : {}),
            ...(resendInMs !== undefined ? { notBeforeInMs: resendInMs, increment: ['errorResends'] as const } : {}),
            updateAttempt: { id: attemptId, status: 'failed', error: end.error, ...finished, ...usage },
          },
        ],
      ];
    }
    case 'interrupted': {
      const event = eventAfterInterruption(h, workOpen);
      const resend = event === 'turn_interrupted_resend';
      return [
        [
          event,
          {
            reason: end.error,
            patch: { deliveryDetail: end.error },
            ...(resend ? { notBeforeInMs: windows.interruptResendDelayMs, increment: ['interruptResends'] as const } : {}),
            updateAttempt: { id: attemptId, status: 'interrupted', error: end.error, ...finished, ...usage },
          },
        ],
      ];
    }
    case 'busy':
      return [
        [
          'session_busy',
          {
            reason: end.detail,
            ...(busyRetryMs > 0 ? { detail: { retryInMs: busyRetryMs } } : {}),
            notBeforeInMs: busyRetryMs,
            updateAttempt: { id: attemptId, status: 'busy', error: end.detail, ...finished },
          },
        ],
      ];
    case 'rejected': {
      const refused: Move = [
        'owner_rejected',
        {
          reason: end.reason,
          increment: ['refusals'],
          patch: { deliveryDetail: end.reason },
          updateAttempt: { id: attemptId, status: 'rejected', error: end.reason, ...finished },
        },
      ];
      return refusalBudgetSpent({ ...h, refusals: h.refusals + 1 })
        ? [refused, ['rejected_twice', { reason: `refused ${h.refusals + 1} times` }]]
        : [refused];
    }
    case 'unobservable':
      return [['unobservable', { reason: end.error, updateAttempt: { id: attemptId, status: 'lost', error: end.error } }]];
    default:
      return assertNever(end, 'turn end');
  }
}

export const started = (attemptId: string): Move => [
  'turn_started',
  { updateAttempt: { id: attemptId, status: 'running', observed: true } },
];
