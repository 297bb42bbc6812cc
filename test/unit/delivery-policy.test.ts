import { describe, expect, it } from 'vitest';
import {
  busyRetryDelayMs,
  DEFAULT_DELIVERY_WINDOWS,
  DELIVERY_POLICY,
  errorResendDelayMs,
  eventAfterInterruption,
  eventAfterNotSent,
  eventAfterTurnError,
  refusalBudgetSpent,
  resendCanHelp,
  unreachableRetryDelayMs,
  unreachableSinceMs,
} from '../../libs/domain/delivery-policy.ts';
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

  it('retries a write that never left, spending no budget, until the recipient has been unreachable for the give-up time (an hour by default)', () => {
    const w = { unreachableGiveUpMs: 60_000 };
    expect(eventAfterNotSent(0, w)).toBe('send_failed');
    expect(eventAfterNotSent(59_999, w)).toBe('send_failed');
    expect(eventAfterNotSent(60_000, w)).toBe('send_gave_up');
    expect(DEFAULT_DELIVERY_WINDOWS.unreachableGiveUpMs).toBe(3_600_000);
    // 0: a write that never left fails the handoff at once.
    expect(eventAfterNotSent(0, { unreachableGiveUpMs: 0 })).toBe('send_gave_up');
  });

  it('counts a recipient unreachable from the first unsent write in a row, unless nobody tried for a long pause (a hold, no worker)', () => {
    expect(unreachableSinceMs(null, null, 50_000), 'the first unsent write starts the count').toBe(50_000);
    expect(unreachableSinceMs(1_000, 40_000, 50_000)).toBe(1_000);
    const gap = DELIVERY_POLICY.maxUnreachableGapMs;
    expect(unreachableSinceMs(1_000, 40_000, 40_000 + gap)).toBe(1_000);
    expect(unreachableSinceMs(1_000, 40_000, 40_001 + gap), 'an unwatched pause restarts it').toBe(40_001 + gap);
    // The longest planned wait (jittered) and a write's own deadline fit well inside the gap.
    expect(gap).toBeGreaterThan(DELIVERY_POLICY.maxUnreachableRetryMs * (1 + DELIVERY_POLICY.retryJitter) + 60_000);
  });

  it("backs writes to an unreachable recipient off: the worker's delay, doubling, about a minute at most, never past the give-up time", () => {
    const mid = () => 0.5;
    const growth = DELIVERY_POLICY.unreachableRetryGrowth;
    expect([0, 1, 2, 3].map((n) => unreachableRetryDelayMs(n, 3_600_000, 2_000, mid))).toEqual([
      2_000,
      2_000 * growth,
      2_000 * growth ** 2,
      2_000 * growth ** 3,
    ]);
    expect(unreachableRetryDelayMs(30, 3_600_000, 2_000, mid)).toBe(DELIVERY_POLICY.maxUnreachableRetryMs);
    // Jittered either way, also at the cap.
    expect(unreachableRetryDelayMs(30, 3_600_000, 2_000, () => 0)).toBe(
      Math.round(DELIVERY_POLICY.maxUnreachableRetryMs * (1 - DELIVERY_POLICY.retryJitter)),
    );
    expect(unreachableRetryDelayMs(30, 3_600_000, 2_000, () => 0.999999)).toBeCloseTo(
      DELIVERY_POLICY.maxUnreachableRetryMs * (1 + DELIVERY_POLICY.retryJitter),
      -1,
    );
    // The last write is made when the time runs out, not after it.
    expect(unreachableRetryDelayMs(10, 1_234, 2_000, mid)).toBe(1_234);
    expect(unreachableRetryDelayMs(0, -5, 2_000, mid)).toBe(0);
  });

  it("backs busy answers off: the worker's delay after the first, doubling with each one in a row, about a minute at most, jittered", () => {
    const mid = () => 0.5;
    const growth = DELIVERY_POLICY.busyRetryGrowth;
    expect([0, 1, 2, 3, 4, 5].map((n) => busyRetryDelayMs(n, undefined, 1_000, mid))).toEqual(
      [0, 1, 2, 3, 4, 5].map((n) => 1_000 * growth ** n),
    );
    expect(busyRetryDelayMs(6, undefined, 1_000, mid)).toBe(DELIVERY_POLICY.maxBusyRetryMs);
    expect(busyRetryDelayMs(1_000, undefined, 1_000, mid)).toBe(DELIVERY_POLICY.maxBusyRetryMs);
    expect(busyRetryDelayMs(0, undefined, 1_000, () => 0)).toBe(Math.round(1_000 * (1 - DELIVERY_POLICY.retryJitter)));
    const spread = new Set(Array.from({ length: 20 }, () => busyRetryDelayMs(3, undefined, 1_000)));
    expect(spread.size).toBeGreaterThan(1);
    // A worker back-off longer than the cap is not shortened by it.
    expect(busyRetryDelayMs(3, undefined, 120_000, mid)).toBe(120_000);
  });

  it('never writes to a busy recipient sooner than its own Retry-After, and waits at most an hour for it', () => {
    const mid = () => 0.5;
    expect(busyRetryDelayMs(0, 5_000, 1_000, mid)).toBe(5_000);
    // A Retry-After shorter than the back-off does not shorten it.
    expect(busyRetryDelayMs(3, 500, 1_000, mid)).toBe(8_000);
    expect(busyRetryDelayMs(0, 86_400_000, 1_000, mid)).toBe(DELIVERY_POLICY.maxRetryAfterMs);
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
