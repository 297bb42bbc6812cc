import { describe, expect, it } from 'vitest';
import { DELIVERY_POLICY, errorResendDelayMs, eventAfterInterruption, eventAfterNotSent, eventAfterTurnError, refusalBudgetSpent, resendCanHelp } from '../../libs/domain/delivery-policy.ts';
import { FAILURE_KINDS } from '../../libs/domain/turn-failure.ts';

const counters = (c: Partial<{ errorResends: number; interruptResends: number; refusals: number }> = {}) => ({
  errorResends: 0,
  interruptResends: 0,
  refusals: 0,
  ...c,
});

describe('delivery policy', () => {
  it('resends an errored turn at most twice', () => {
    expect(eventAfterTurnError(counters())).toBe('turn_failed_resend');
    expect(eventAfterTurnError(counters({ errorResends: 1 }))).toBe('turn_failed_resend');
    expect(eventAfterTurnError(counters({ errorResends: 2 }))).toBe('turn_failed');
  });

  it('resends an interrupted turn once, and only while the work is open', () => {
    expect(eventAfterInterruption(counters(), true)).toBe('turn_interrupted_resend');
    expect(eventAfterInterruption(counters({ interruptResends: 1 }), true)).toBe('turn_interrupted');
    expect(eventAfterInterruption(counters(), false)).toBe('turn_interrupted');
  });

  it('retries a refused write once', () => {
    expect(refusalBudgetSpent(counters({ refusals: 1 }))).toBe(false);
    expect(refusalBudgetSpent(counters({ refusals: 2 }))).toBe(true);
  });

  it('retries a write that never left while the error budget lasts', () => {
    expect(eventAfterNotSent(counters({ errorResends: 1 }))).toBe('send_failed');
    expect(eventAfterNotSent(counters({ errorResends: 2 }))).toBe('send_gave_up');
  });

  it('resends only a transient failure (or one of unknown kind); every other kind fails at once', () => {
    expect(resendCanHelp(undefined)).toBe(true);
    for (const kind of FAILURE_KINDS) {
      expect(resendCanHelp({ kind }), kind).toBe(kind === 'transient');
      expect(eventAfterTurnError(counters(), { kind }), kind).toBe(kind === 'transient' ? 'turn_failed_resend' : 'turn_failed');
    }
    // The budget still bounds a transient one.
    expect(eventAfterTurnError(counters({ errorResends: 2 }), { kind: 'transient' })).toBe('turn_failed');
  });

  it('backs an errored resend off: the configured delay, then growing, jittered either way', () => {
    const w = { errorResendDelayMs: 30_000 };
    const growth = DELIVERY_POLICY.errorResendGrowth;
    const spread = DELIVERY_POLICY.errorResendJitter;
    // random() = 0.5 is the middle of the spread: no jitter.
    expect(errorResendDelayMs(0, undefined, w, () => 0.5)).toBe(30_000);
    expect(errorResendDelayMs(1, undefined, w, () => 0.5)).toBe(30_000 * growth);
    expect(errorResendDelayMs(0, undefined, w, () => 0)).toBe(Math.round(30_000 * (1 - spread)));
    expect(errorResendDelayMs(0, undefined, w, () => 0.999999)).toBeCloseTo(30_000 * (1 + spread), -1);
    // Two turns that failed together come back apart.
    const delays = new Set(Array.from({ length: 20 }, () => errorResendDelayMs(0, undefined, w)));
    expect(delays.size).toBeGreaterThan(1);
  });

  it("never resends sooner than the runtime's retry time, and waits at most an hour for it", () => {
    const w = { errorResendDelayMs: 1_000 };
    expect(errorResendDelayMs(0, { kind: 'transient', retryAfterMs: 45_000 }, w, () => 0.5)).toBe(45_000);
    // A retry time shorter than the back-off does not shorten it.
    expect(errorResendDelayMs(1, { kind: 'transient', retryAfterMs: 10 }, w, () => 0.5)).toBe(1_000 * DELIVERY_POLICY.errorResendGrowth);
    expect(errorResendDelayMs(0, { kind: 'transient', retryAfterMs: 10 * 3_600_000 }, w, () => 0.5)).toBe(DELIVERY_POLICY.maxRetryAfterMs);
  });
});
