/** How fast one token may call: `perSecond` refill into a bucket of `burst`; 0 turns it off. */
export interface RateLimit {
  readonly perSecond: number;
  readonly burst: number;
}

export const DEFAULT_RATE_LIMIT: RateLimit = { perSecond: 100, burst: 200 };

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * Token buckets keyed by caller (a token id), in one process. `take` answers 0 when the call
 * may go ahead, or the whole seconds to wait. Idle buckets (full again) are dropped once there
 * are many, so memory stays bounded by the callers active in the last `burst / perSecond` s.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly limit: RateLimit,
    private readonly maxKeys = 10_000,
  ) {}

  get enabled(): boolean {
    return this.limit.perSecond > 0;
  }

  take(key: string, nowMs: number): number {
    if (!this.enabled) return 0;
    const { perSecond, burst } = this.limit;
    const b = this.buckets.get(key) ?? { tokens: burst, at: nowMs };
    b.tokens = Math.min(burst, b.tokens + ((nowMs - b.at) / 1000) * perSecond);
    b.at = nowMs;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      this.buckets.set(key, b);
      if (this.buckets.size > this.maxKeys) this.prune(nowMs);
      return 0;
    }
    this.buckets.set(key, b);
    return Math.max(1, Math.ceil((1 - b.tokens) / perSecond));
  }

  private prune(nowMs: number): void {
    const { perSecond, burst } = this.limit;
    for (const [key, b] of this.buckets) {
      if (b.tokens + ((nowMs - b.at) / 1000) * perSecond >= burst) this.buckets.delete(key);
    }
  }
}
