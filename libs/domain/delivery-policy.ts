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
  /** An interrupted turn is resent once. */
  maxInterruptResends: 1,
  /** ...and only after this long. */
  interruptResendDelayMs: 10 * 60_000,
  /** An accepted turn nobody can observe for this long becomes UNCERTAIN. */
  unobservableAfterMs: 10 * 60_000,
  /** Complete history scans that must miss a request id before it is proven absent... */
  absenceScans: 3,
  /** ...spread over at least this long. */
  absenceWindowMs: 60 * 60_000,
} as const;

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
