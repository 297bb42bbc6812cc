import { describe, expect, it } from 'vitest';
import { DEFAULT_DELIVERY_WINDOWS } from '../../libs/domain/delivery-policy.ts';
import { FAILED_LOOK_RETRY, failedLookRetryMs, INCOMPLETE_SCAN_RETRY_MS } from '../../libs/domain/observation-retry.ts';

describe('failedLookRetryMs: when an UNCERTAIN handoff whose look failed is looked at again', () => {
  it('with the default windows: 15 s, 30 s, 1, 2, 4 min, then every 5 min (the incomplete scan retry)', () => {
    const waits = [1, 2, 3, 4, 5, 6, 7, 50, 10_000].map((n) => failedLookRetryMs(n, DEFAULT_DELIVERY_WINDOWS));
    expect(waits).toEqual([15_000, 30_000, 60_000, 120_000, 240_000, 300_000, 300_000, 300_000, 300_000]);
    expect(FAILED_LOOK_RETRY.firstMs).toBe(15_000);
    expect(INCOMPLETE_SCAN_RETRY_MS).toBe(300_000);
  });

  it('never waits longer than the spacing of the complete scans (short windows retry as fast as they scan)', () => {
    const fast = { ...DEFAULT_DELIVERY_WINDOWS, absenceScans: 2, absenceWindowMs: 2_000 };
    expect([1, 2, 3].map((n) => failedLookRetryMs(n, fast))).toEqual([2_000, 2_000, 2_000]);
  });

  it('grows from the first wait whatever count it is given (0 or less reads as the first)', () => {
    expect(failedLookRetryMs(0, DEFAULT_DELIVERY_WINDOWS)).toBe(FAILED_LOOK_RETRY.firstMs);
    expect(failedLookRetryMs(-3, DEFAULT_DELIVERY_WINDOWS)).toBe(FAILED_LOOK_RETRY.firstMs);
  });
});
