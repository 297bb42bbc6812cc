import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type { Logger } from '../logging/create-logger.ts';
import type { RedisNames } from '../queue/redis-names.ts';

const script = (name: string) => readFileSync(new URL(`./scripts/${name}.lua`, import.meta.url), 'utf8');
const ACQUIRE = script('acquire-turn-lock');
const EXTEND = script('extend-turn-lock');
const RELEASE = script('release-turn-lock');

type LockCommands = {
  batonAcquireTurnLock(key: string, token: string, ttlMs: number): Promise<[number, string | null, number?]>;
  batonExtendTurnLock(key: string, token: string, ttlMs: number): Promise<number>;
  batonReleaseTurnLock(key: string, token: string): Promise<number>;
};

/** A held turn lock. `signal` aborts the moment ownership can no longer be proven. */
export interface TurnLock {
  readonly agentId: string;
  readonly token: string;
  readonly signal: AbortSignal;
  /** Stops extending and deletes the lock if this holder still owns it. */
  release(): Promise<boolean>;
}

export type AcquireResult =
  | { readonly acquired: true; readonly lock: TurnLock }
  | { readonly acquired: false; readonly holder: string | null; readonly retryInMs: number };

/**
 * One active turn per agent across every worker process. The lock is a Redis key holding a
 * random token; it is extended every ttl/3 while the turn runs, and extend and release act
 * only while the caller's token is still there (scripts in ./scripts). If an extension fails
 * for a whole ttl (the key expired, was taken over, or Redis was wiped) the holder's signal
 * aborts, and it must stop writing: Postgres revisions fence anything it still tries.
 */
export class TurnLocks {
  private readonly redis: Redis & LockCommands;

  constructor(
    redis: Redis,
    private readonly names: RedisNames,
    private readonly opts: { ttlMs: number; logger: Logger },
  ) {
    const r = redis as Redis & Partial<LockCommands>;
    if (typeof r.batonAcquireTurnLock !== 'function') {
      redis.defineCommand('batonAcquireTurnLock', { numberOfKeys: 1, lua: ACQUIRE });
      redis.defineCommand('batonExtendTurnLock', { numberOfKeys: 1, lua: EXTEND });
      redis.defineCommand('batonReleaseTurnLock', { numberOfKeys: 1, lua: RELEASE });
    }
    this.redis = redis as Redis & LockCommands;
  }

  /** Tries once; never waits. */
  async acquire(agentId: string): Promise<AcquireResult> {
    const key = this.names.turnLock(agentId);
    const token = randomUUID();
    const [ok, holder, pttl] = await this.redis.batonAcquireTurnLock(key, token, this.opts.ttlMs);
    if (ok !== 1) {
      // pttl -1/-2: no expiry or just vanished; retry soon either way.
      const retryInMs = typeof pttl === 'number' && pttl > 0 ? pttl : 50;
      return { acquired: false, holder: holder ?? null, retryInMs };
    }
    return { acquired: true, lock: this.hold(agentId, key, token) };
  }

  private hold(agentId: string, key: string, token: string): TurnLock {
    const controller = new AbortController();
    const { ttlMs, logger } = this.opts;
    let confirmedAt = Date.now();
    let released = false;
    let extending = false;
    const timer = setInterval(() => {
      if (extending || released) return;
      extending = true;
      this.redis
        .batonExtendTurnLock(key, token, ttlMs)
        .then((ok) => {
          if (ok === 1) confirmedAt = Date.now();
          else lose('the turn lock was taken over or expired');
        })
        .catch((err: unknown) => {
          if (Date.now() - confirmedAt >= ttlMs) lose('the turn lock could not be extended');
          else logger.warn({ err, agentId }, 'turn lock extension failed; retrying');
        })
        .finally(() => {
          extending = false;
        });
    }, Math.max(50, Math.floor(ttlMs / 3)));
    timer.unref();
    const lose = (reason: string) => {
      if (controller.signal.aborted) return;
      clearInterval(timer);
      logger.warn({ agentId }, 'turn lock lost');
      controller.abort(new Error(reason));
    };
    return {
      agentId,
      token,
      signal: controller.signal,
      release: async () => {
        if (released) return false;
        released = true;
        clearInterval(timer);
        if (controller.signal.aborted) return false;
        try {
          return (await this.redis.batonReleaseTurnLock(key, token)) === 1;
        } catch (err) {
          // The key expires on its own within ttl; nothing else to do.
          logger.warn({ err, agentId }, 'turn lock release failed; it will expire');
          return false;
        }
      },
    };
  }

  /** Which of the agents have a turn lock held right now (one round trip). */
  async held(agentIds: readonly string[]): Promise<boolean[]> {
    if (agentIds.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of agentIds) pipeline.exists(this.names.turnLock(id));
    const results = (await pipeline.exec()) ?? [];
    return results.map(([err, n]) => !err && n === 1);
  }

  /**
   * Which of the agents are busy for the reconciler: a turn lock is held, or the agent is
   * backing off. One round trip.
   */
  async busy(agentIds: readonly string[]): Promise<boolean[]> {
    if (agentIds.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of agentIds) pipeline.exists(this.names.turnLock(id), this.names.backoff(id));
    const results = (await pipeline.exec()) ?? [];
    return results.map(([err, n]) => !err && typeof n === 'number' && n > 0);
  }

  /**
   * Marks the agent as backing off for `ms`: the reconciler's sweep leaves it alone until then
   * (its own due job wakes it). Lost with Redis, which only makes the next sweep look sooner.
   */
  async backOff(agentId: string, ms: number): Promise<void> {
    await this.redis.set(this.names.backoff(agentId), '1', 'PX', Math.max(1, Math.round(ms)));
  }

  /**
   * Takes the reconciler lead for `ms` if nobody holds it: one process runs each pass. The key
   * is not released: it simply expires, so a leader that dies costs at most one interval.
   */
  async tryLeadReconciler(group: string, holder: string, ms: number): Promise<boolean> {
    return (await this.redis.set(this.names.reconcilerLeader(group), holder, 'PX', Math.max(1, ms), 'NX')) === 'OK';
  }
}
