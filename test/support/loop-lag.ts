import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/**
 * How late this process's timers ran while a test measured a bound. A test that checks "this
 * happens within N ms of that" on a busy machine adds the lag it observed to N: the bound is the
 * code's, the lag is the machine's (issue 31: tests must not depend on a quiet host).
 */
export interface LoopLag {
  /** The largest timer delay seen since start, in ms (at least the 20 ms sampling resolution). */
  maxMs(): number;
  stop(): void;
}

export function watchLoopLag(): LoopLag {
  const histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  return {
    maxMs: () => Math.max(20, histogram.max / 1e6),
    stop: () => histogram.disable(),
  };
}
