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
  /**
   * After a write the session answered busy (nothing done, no budget spent), each wait before
   * the next write is this many times longer than the one before...
   */
  busyRetryGrowth: 2,
  /** ...up to about this long: a session that stays busy is written to about once a minute. */
  maxBusyRetryMs: 60_000,
  /**
   * After a write that never left Baton (the recipient unreachable), each wait before the next
   * write is this many times longer than the one before...
   */
  unreachableRetryGrowth: 2,
  /** ...up to about this long: a recipient that comes back gets its write within about a minute. */
  maxUnreachableRetryMs: 60_000,
  /** Busy and unreachable waits are spread by up to this fraction either way, so recipients that failed together are not written to together. */
  retryJitter: 0.2,
  /**
   * A pause longer than this between two writes that never left (well past the longest wait and
   * a write's deadline: a hold, the outage guard, no worker running) restarts the count of how
   * long the recipient has been unreachable: nobody was trying then, so it is not counted.
   */
  maxUnreachableGapMs: 5 * 60_000,
} as const;

/**
 * The reconciliation windows: how long Baton waits before it decides something it cannot see.
 * Operators tune them (libs/config: BATON_INTERRUPTED_RESEND_AFTER_MS, BATON_ERROR_RESEND_AFTER_MS, BATON_UNOBSERVABLE_AFTER_MS,
 * BATON_UNCERTAIN_SCANS, BATON_UNCERTAIN_SCAN_WINDOW_MS, BATON_UNREACHABLE_GIVE_UP_MS); the workers get them as a dependency.
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
  /**
   * A recipient whose writes never leave Baton (`not_sent`: connection refused, the program
   * cannot start) is written to again, no attempt budget spent, until it has been unreachable
   * this long, counted from the first of those writes in a row (`unreachableSinceMs`); then the
   * handoff is FAILED (`send_gave_up`) with a reason that says so.
   */
  readonly unreachableGiveUpMs: number;
  /** Complete history scans that must miss a request id before it is proven absent (at least 2)... */
  readonly absenceScans: number;
  /** ...spread over at least this long. */
  readonly absenceWindowMs: number;
  /**
   * A handoff sent to a role whose bound agent has not had a turn written for it this long after
   * the binding (still WAITING, BUSY, HELD or OWNER_REJECTED there) is routed again
   * (`rerouted`): the reconciler unbinds it and another capable agent may take it.
   */
  readonly roleRerouteAfterMs: number;
}

export const DEFAULT_DELIVERY_WINDOWS: DeliveryWindows = Object.freeze({
  interruptResendDelayMs: 10 * 60_000,
  errorResendDelayMs: 30_000,
  unobservableAfterMs: 10 * 60_000,
  unreachableGiveUpMs: 60 * 60_000,
  absenceScans: 3,
  absenceWindowMs: 60 * 60_000,
  roleRerouteAfterMs: 5 * 60_000,
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
export function errorResendDelayMs(
  resendsSoFar: number,
  failure: TurnFailure | undefined,
  w: Pick<DeliveryWindows, 'errorResendDelayMs'>,
  random: () => number = Math.random,
): number {
  const base = w.errorResendDelayMs * DELIVERY_POLICY.errorResendGrowth ** Math.max(0, resendsSoFar);
  const jittered = base * (1 + DELIVERY_POLICY.errorResendJitter * (2 * random() - 1));
  const floor = Math.min(failure?.retryAfterMs ?? 0, DELIVERY_POLICY.maxRetryAfterMs);
  return Math.round(Math.max(jittered, floor));
}

/** After a turn was interrupted: resend once, later, and only while the work is still open. */
export function eventAfterInterruption(c: ResendCounters, workStillOpen: boolean): DeliveryEvent {
  return workStillOpen && c.interruptResends < DELIVERY_POLICY.maxInterruptResends ? 'turn_interrupted_resend' : 'turn_interrupted';
}

/** After a refusal has been recorded (refusals already counts it): retry once, then give up. */
export function refusalBudgetSpent(c: ResendCounters): boolean {
  return c.refusals >= DELIVERY_POLICY.maxRefusals;
}

/** `baseMs` grown `growth`-fold `n` times, at most `capMs` (never below `baseMs`), spread by ±`retryJitter`. */
function backedOffMs(baseMs: number, growth: number, n: number, capMs: number, random: () => number): number {
  const grown = Math.min(baseMs * growth ** Math.max(0, n), Math.max(capMs, baseMs));
  return Math.round(grown * (1 + DELIVERY_POLICY.retryJitter * (2 * random() - 1)));
}

/**
 * How long a handoff waits after its write was answered busy (the session in a turn, a program's
 * busy exit, a webhook's 409/423/429): `baseMs` (the worker's busy back-off) after the first busy
 * answer in a row, growing by `busyRetryGrowth` with each one after it (`busyBefore`: the busy
 * answers in a row before this one), at most about `maxBusyRetryMs`, ±`retryJitter`; never
 * sooner than the recipient's own retry time (`Retry-After`; at most `maxRetryAfterMs`). With
 * the worker's 1 s: about 1, 2, 4, 8, 16, 32 s, then about once a minute, for as long as the
 * session says busy (busy spends no budget; the sender may cancel).
 */
export function busyRetryDelayMs(
  busyBefore: number,
  retryAfterMs: number | undefined,
  baseMs: number,
  random: () => number = Math.random,
): number {
  const waited = backedOffMs(baseMs, DELIVERY_POLICY.busyRetryGrowth, busyBefore, DELIVERY_POLICY.maxBusyRetryMs, random);
  return Math.max(waited, Math.round(Math.min(retryAfterMs ?? 0, DELIVERY_POLICY.maxRetryAfterMs)));
}

/**
 * After a write that provably never left Baton (`not_sent`): the recipient is unreachable, an
 * outage of that recipient rather than a spent attempt. Write again (`send_failed`, WAITING)
 * until it has been unreachable for `unreachableGiveUpMs` (counted from the first such write in
 * a row), then give up (`send_gave_up`, FAILED).
 */
export function eventAfterNotSent(unreachableForMs: number, w: Pick<DeliveryWindows, 'unreachableGiveUpMs'>): DeliveryEvent {
  return unreachableForMs < w.unreachableGiveUpMs ? 'send_failed' : 'send_gave_up';
}

/**
 * Since when the recipient of a write that never left (made at `wroteAtMs`) counts as
 * unreachable: since the first of the unsent writes in a row before it (`firstMs`, the newest of
 * them `lastMs`), unless more than `maxUnreachableGapMs` passed since that newest one (then
 * since this write: the pause was not watched).
 */
export function unreachableSinceMs(firstMs: number | null, lastMs: number | null, wroteAtMs: number): number {
  if (firstMs === null || lastMs === null || wroteAtMs - lastMs > DELIVERY_POLICY.maxUnreachableGapMs) return wroteAtMs;
  return firstMs;
}

/**
 * How long a handoff waits before writing again to a recipient it could not reach: `baseMs` (the
 * worker's) after the first such write in a row, growing by `unreachableRetryGrowth` with each
 * one after it (`unsentBefore`), at most about `maxUnreachableRetryMs`, ±`retryJitter`, and never
 * past the give-up time (`untilGiveUpMs`), so the last write is made when the time runs out. With
 * the worker's 2 s: about 2, 4, 8, 16, 32 s, then about once a minute, for an hour by default.
 */
export function unreachableRetryDelayMs(
  unsentBefore: number,
  untilGiveUpMs: number,
  baseMs: number,
  random: () => number = Math.random,
): number {
  const waited = backedOffMs(baseMs, DELIVERY_POLICY.unreachableRetryGrowth, unsentBefore, DELIVERY_POLICY.maxUnreachableRetryMs, random);
  return Math.max(0, Math.min(waited, Math.round(untilGiveUpMs)));
}
