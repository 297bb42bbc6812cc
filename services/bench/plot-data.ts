/*
 * What the HTML report's plots need, recorded during a run at next to no cost: latencies as
 * counts per fixed bucket (not every sample), and completions counted per second.
 */

/**
 * Bucket bounds of every latency histogram, ms: roughly three per decade from 0.5 ms to 60 s,
 * the same for every scenario so their plots compare. A value falls into the first bucket whose
 * bound it does not exceed; `counts` has one more entry than the bounds, for what is above the last.
 */
export const LATENCY_BOUNDS_MS: readonly number[] = [
  0.5, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1_000, 1_500, 2_000, 3_000, 5_000, 7_000, 10_000, 15_000,
  20_000, 30_000, 60_000,
];

/** Latencies as counts per bucket of LATENCY_BOUNDS_MS (`counts[i]`: at most `boundsMs[i]`, above the previous bound). */
export interface LatencyHistogram {
  boundsMs: number[];
  counts: number[];
}

/** Counts `valuesMs` into the fixed buckets; non-finite values are left out. */
export function latencyHistogram(valuesMs: Iterable<number>): LatencyHistogram {
  const bounds = [...LATENCY_BOUNDS_MS];
  const counts = new Array<number>(bounds.length + 1).fill(0);
  for (const v of valuesMs) {
    if (!Number.isFinite(v)) continue;
    let i = 0;
    while (i < bounds.length && v > bounds[i]!) i++;
    counts[i]!++;
  }
  return { boundsMs: bounds, counts };
}

/**
 * How many of `timesMs` fall into each whole second after `startMs` (entry 0: the first second).
 * Times before the start count in the first second; an empty list gives [].
 */
export function perSecondCounts(timesMs: Iterable<number>, startMs: number): number[] {
  const counts: number[] = [];
  for (const t of timesMs) {
    if (!Number.isFinite(t)) continue;
    const s = Math.max(0, Math.floor((t - startMs) / 1000));
    while (counts.length <= s) counts.push(0);
    counts[s]!++;
  }
  return counts;
}

/** A delivery run's series for the plots: its latency distributions and its rates over time. */
export interface DeliverySeries {
  /** Per handoff, from its commit: to the adapter call (dispatch), to ACCEPTED, to RETURNED. */
  latency: { dispatch: LatencyHistogram; accepted: LatencyHistogram; returned: LatencyHistogram };
  /** Per second from the first commit: handoffs committed, handoffs RETURNED. */
  perSecond: { sent: number[]; returned: number[] };
}
