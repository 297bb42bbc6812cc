import type { DeliveryEvent } from './transitions.ts';
import type { TurnFailure } from './turn-failure.ts';

/**
 * The bounds of the delivery guarantees. Pure data and pure decisions; the use cases in
 * libs/handoffs call these and then apply the event the decision names.
 */
export const DELIVERY_POLICY = {
  /** A refused write is retried once; the second refusal fails the delivery. */
  maxRefusals: 2,
  /** An errored turn is resent at most twice, and only when its failure is transient. */
  maxErrorResends: 2,
  /** Each resend of an errored turn waits this many times longer than the one before. */
  errorResendGrowth: 4,
  /** Every resend delay is spread by up to this fraction either way, so turns that failed together do not come back together. */
  errorResendJitter: 0.2,
  /** The longest a runtime's own retry time may hold a resend back. */
  maxRetryAfterMs: 60 * 60_000,
  /** An interrupted turn is resent once (after `DeliveryWindows.interruptResendDelayMs`). */
  maxInterruptResends: 1,
} as const;

/**
 * The reconciliation windows: how long Baton waits before it decides something it cannot see.
 * Operators tune them (libs/config: BATON_INTERRUPTED_RESEND_AFTER_MS, BATON_ERROR_RESEND_AFTER_MS, BATON_UNOBSERVABLE_AFTER_MS,
 * BATON_UNCERTAIN_SCANS, BATON_UNCERTAIN_SCAN_WINDOW_MS); the workers get them as a dependency.
 */
export interface DeliveryWindows {
  /** An interrupted turn is resent only after this long. */
  readonly interruptResendDelayMs: number;
  /**
   * The first resend of a turn that failed transiently waits about this long; each next one
   * `DELIVERY_POLICY.errorResendGrowth` times longer (jittered), and never less than the
   * runtime's own retry time.
   */
  readonly errorResendDelayMs: number;
  /** An accepted turn nobody can observe for this long becomes UNCERTAIN. */
  readonly unobservableAfterMs: number;
  /** Complete history scans that must miss a request id before it is proven absent (at least 2)... */
  readonly absenceScans: number;
  /** ...spread over at least this long. */
  readonly absenceWindowMs: number;
}

export const DEFAULT_DELIVERY_WINDOWS: DeliveryWindows = Object.freeze({
  interruptResendDelayMs: 10 * 60_000,
  errorResendDelayMs: 30_000,
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

/** Whether resending can help a turn that failed so: only a transient failure (or one of unknown kind). */
export function resendCanHelp(failure: TurnFailure | undefined): boolean {
  return failure === undefined || failure.kind === 'transient';
}

/**
 * After a turn ended in error: resend (new request id) while the budget lasts and the failure
 * is transient, else fail at once.
 */
export function eventAfterTurnError(c: ResendCounters, failure?: TurnFailure): DeliveryEvent {
  return resendCanHelp(failure) && c.errorResends < DELIVERY_POLICY.maxErrorResends ? 'turn_failed_resend' : 'turn_failed';
}

/**
 * How long the resend of an errored turn waits: `errorResendDelayMs` for the first, growing by
 * `errorResendGrowth` for each one after (`resendsSoFar`: resends already made), spread by
 * ±`errorResendJitter`; never sooner than the runtime's retry time (at most `maxRetryAfterMs`).
 * `random` is in [0, 1). With the defaults: about 30 s, then about 2 min.
 */
export function errorResendDelayMs(resendsSoFar: number, failure: TurnFailure | undefined, w: Pick<DeliveryWindows, 'errorResendDelayMs'>, random: () => number = Math.random): number {
  const base = w.errorResendDelayMs * DELIVERY_POLICY.errorResendGrowth ** Math.max(0, resendsSoFar);
  const jittered = base * (1 + DELIVERY_POLICY.errorResendJitter * (2 * random() - 1));
  const floor = Math.min(failure?.retryAfterMs ?? 0, DELIVERY_POLICY.maxRetryAfterMs);
  return Math.round(Math.max(jittered, floor));
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
