import { describe, expect, it } from 'vitest';
import { advanceSafeHorizon, EMPTY_HORIZON } from '../../libs/handoffs/safe-horizon.ts';

const FINAL_AFTER_MS = 1_000;

describe('advanceSafeHorizon', () => {
  it('makes a top safe at once when nobody is writing events', () => {
    const h = advanceSafeHorizon(EMPTY_HORIZON, { top: 10n, writers: [] }, 0, FINAL_AFTER_MS);
    expect(h).toEqual({ safe: 10n, pending: [] });
  });

  it('holds a top back while a transaction seen with it is still writing (an id may still commit below it)', () => {
    const first = advanceSafeHorizon({ safe: 5n, pending: [] }, { top: 11n, writers: ['3/7'] }, 0, FINAL_AFTER_MS);
    expect(first.safe).toBe(5n);
    expect(first.pending.map((p) => p.top)).toEqual([11n]);
    // 3/7 still writing, a newer top appears with another writer: neither is safe yet.
    const second = advanceSafeHorizon(first, { top: 12n, writers: ['3/7', '4/2'] }, 10, FINAL_AFTER_MS);
    expect(second.safe).toBe(5n);
    expect(second.pending.map((p) => p.top)).toEqual([11n, 12n]);
    // 3/7 ended, 4/2 still writing: 11 becomes safe, 12 waits for 4/2.
    const third = advanceSafeHorizon(second, { top: 12n, writers: ['4/2'] }, 20, FINAL_AFTER_MS);
    expect(third.safe).toBe(11n);
    expect(third.pending.map((p) => p.top)).toEqual([12n]);
    const fourth = advanceSafeHorizon(third, { top: 12n, writers: [] }, 30, FINAL_AFTER_MS);
    expect(fourth).toEqual({ safe: 12n, pending: [] });
  });

  it('ignores writers that started after the top was seen', () => {
    const seen = advanceSafeHorizon(EMPTY_HORIZON, { top: 7n, writers: ['1/1'] }, 0, FINAL_AFTER_MS);
    const h = advanceSafeHorizon(seen, { top: 7n, writers: ['9/9'] }, 5, FINAL_AFTER_MS);
    expect(h.safe).toBe(7n);
  });

  it('gives up waiting after finalAfterMs, so a writer that never ends stalls the log only that long', () => {
    const seen = advanceSafeHorizon(EMPTY_HORIZON, { top: 20n, writers: ['2/2'] }, 0, FINAL_AFTER_MS);
    expect(advanceSafeHorizon(seen, { top: 20n, writers: ['2/2'] }, FINAL_AFTER_MS - 1, FINAL_AFTER_MS).safe).toBe(0n);
    expect(advanceSafeHorizon(seen, { top: 20n, writers: ['2/2'] }, FINAL_AFTER_MS, FINAL_AFTER_MS).safe).toBe(20n);
  });

  it('never moves the safe id back, and drops pending tops it has passed', () => {
    const h = advanceSafeHorizon({ safe: 30n, pending: [] }, { top: 25n, writers: [] }, 0, FINAL_AFTER_MS);
    expect(h).toEqual({ safe: 30n, pending: [] });
    const a = advanceSafeHorizon(EMPTY_HORIZON, { top: 3n, writers: ['a'] }, 0, FINAL_AFTER_MS);
    const b = advanceSafeHorizon(a, { top: 4n, writers: ['a'] }, 900, FINAL_AFTER_MS);
    // At 1000 the first top has waited long enough; the second has not, and 'a' still writes.
    const c = advanceSafeHorizon(b, { top: 4n, writers: ['a'] }, 1_000, FINAL_AFTER_MS);
    expect(c.safe).toBe(3n);
    expect(c.pending.map((p) => p.top)).toEqual([4n]);
  });
});
