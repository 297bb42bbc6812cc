import type { DeliveryEvent } from './transitions.ts';

/**
 * The bounds of the delivery guarantees. Pure data and pure decisions; the use cases in
 * libs/handoffs call these and then apply the event the decision names.
 */
export const DELIVERY_POLICY = {
  /** A refused write is retried once; the second refusal fails the delivery. */
  maxRefusals: 2,
  /** An errored turn is resent at most twice. */
  maxErrorResends: 2,
  /** An interrupted turn is resent once (after `DeliveryWindows.interruptResendDelayMs`). */
  maxInterruptResends: 1,
} as const;

/**
 * The reconciliation windows: how long Baton waits before it decides something it cannot see.
 * Operators tune them (libs/config: BATON_INTERRUPTED_RESEND_AFTER_MS, BATON_UNOBSERVABLE_AFTER_MS,
 * BATON_UNCERTAIN_SCANS, BATON_UNCERTAIN_SCAN_WINDOW_MS); the workers get them as a dependency.
 */
export interface DeliveryWindows {
  /** An interrupted turn is resent only after this long. */
  readonly interruptResendDelayMs: number;
  /** An accepted turn nobody can observe for this long becomes UNCERTAIN. */
  readonly unobservableAfterMs: number;
  /** Complete history scans that must miss a request id before it is proven absent (at least 2)... */
  readonly absenceScans: number;
  /** ...spread over at least this long. */
  readonly absenceWindowMs: number;
}

export const DEFAULT_DELIVERY_WINDOWS: DeliveryWindows = Object.freeze({
  interruptResendDelayMs: 10 * 60_000,
  unobservableAfterMs: 10 * 60_000,
  absenceScans: 3,
  absenceWindowMs: 60 * 60_000,
});

/** The wait between two complete history scans: the scans are spread evenly over the window. */
export function absenceScanSpacingMs(w: DeliveryWindows): number {
  return w.absenceWindowMs / Math.max(1, w.absenceScans - 1);
}

export interface ResendCounters {
  errorResends: number;
  interruptResends: number;
  refusals: number;
}

/** After a turn ended in error: resend (new request id) while the budget lasts, else fail. */
export function eventAfterTurnError(c: ResendCounters): DeliveryEvent {
  return c.errorResends < DELIVERY_POLICY.maxErrorResends ? 'turn_failed_resend' : 'turn_failed';
}

/** After a turn was interrupted: resend once, later, and only while the work is still open. */
export function eventAfterInterruption(c: ResendCounters, workStillOpen: boolean): DeliveryEvent {
  return workStillOpen && c.interruptResends < DELIVERY_POLICY.maxInterruptResends
    ? 'turn_interrupted_resend'
    : 'turn_interrupted';
}

/** After a refusal has been recorded (refusals already counts it): retry once, then give up. */
export function refusalBudgetSpent(c: ResendCounters): boolean {
  return c.refusals >= DELIVERY_POLICY.maxRefusals;
}

/** After a write provably did not happen: try again later while the error budget lasts. */
export function eventAfterNotSent(c: ResendCounters): DeliveryEvent {
  return c.errorResends < DELIVERY_POLICY.maxErrorResends ? 'send_failed' : 'send_gave_up';
}
