import type { Caller } from './caller.ts';
import { TOKEN_CACHE_DEFAULTS } from '../config/component-defaults.ts';

/**
 * A per-process cache of successful token look-ups (sha256 of the secret -> caller), so a
 * busy caller does not cost a Postgres round trip on every request.
 *
 * What it promises, and how:
 * - **the process that revokes** refuses the token from its very next request: every change
 *   that can end a token (a revocation, an agent removed, a project deleted) calls
 *   `invalidate()`, which empties this cache before the change is reported done;
 * - **every other process** refuses it within `maxAgeMs` (1 s): `invalidate()` also announces
 *   the change (Redis pub/sub, libs/queue/auth-changes.ts), which empties the other processes'
 *   caches within milliseconds; and no entry is ever used longer than `maxAgeMs` after it was
 *   read from Postgres, which bounds it when an announcement is lost (Redis away, a publisher
 *   cut off);
 * - **no stale entry outlives an invalidation**: a look-up that started before an
 *   invalidation does not store its (possibly stale) answer (`epoch`).
 * Only positive answers are kept; an unknown or revoked token always goes to Postgres.
 */
export class TokenCache {
  private readonly entries = new Map<string, { readonly caller: Caller; readonly at: number }>();
  private epoch = 0;

  constructor(
    private readonly opts: {
      readonly maxAgeMs?: number;
      readonly maxEntries?: number;
      /** Called after a local invalidation: tells the other processes (never throws). */
      readonly announce?: () => void;
      readonly now?: () => number;
    } = {},
  ) {}

  private get maxAgeMs(): number {
    return this.opts.maxAgeMs ?? TOKEN_CACHE_DEFAULTS.maxAgeMs;
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  /** The cached caller for this secret hash, if read from Postgres less than maxAgeMs ago. */
  get(secretHash: string): Caller | undefined {
    const hit = this.entries.get(secretHash);
    if (!hit) return undefined;
    if (this.now() - hit.at >= this.maxAgeMs) {
      this.entries.delete(secretHash);
      return undefined;
    }
    return hit.caller;
  }

  /** Taken before a Postgres look-up; pass it to put(). */
  begin(): { readonly epoch: number; readonly at: number } {
    return { epoch: this.epoch, at: this.now() };
  }

  /** Keeps a look-up's answer, unless an invalidation happened since it began. */
  put(secretHash: string, caller: Caller, started: { readonly epoch: number; readonly at: number }): void {
    if (started.epoch !== this.epoch) return;
    if (this.entries.size >= (this.opts.maxEntries ?? TOKEN_CACHE_DEFAULTS.maxEntries)) {
      // Oldest first (Map keeps insertion order).
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.delete(secretHash);
    this.entries.set(secretHash, { caller, at: started.at });
  }

  /** Forgets everything here, then tells the other processes to do the same. */
  invalidate(): void {
    this.forget();
    this.opts.announce?.();
  }

  /** Forgets everything here (an announcement from another process, or a lost subscription). */
  forget(): void {
    this.epoch++;
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
