import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Cluster } from 'ioredis';
import type { RedisClient } from '../queue/open-redis.ts';
import type { Logger } from '../logging/create-logger.ts';
import type { RedisNames } from '../queue/redis-names.ts';
import { TURN_LOCK_DEFAULTS } from '../config/component-defaults.ts';

const script = (name: string) => readFileSync(new URL(`./scripts/${name}.lua`, import.meta.url), 'utf8');
const ACQUIRE = script('acquire-turn-lock');
const EXTEND = script('extend-turn-lock');
const RELEASE = script('release-turn-lock');
const WAKE_HOLDER_IF_HELD = script('wake-holder-if-held');

type LockCommands = {
  batonAcquireTurnLock(
    key: string,
    fenceKey: string,
    pendingKey: string,
    token: string,
    ttlMs: number,
    pendingMs: number,
  ): Promise<[number, string | null, (number | string)?]>;
  batonExtendTurnLock(key: string, token: string, ttlMs: number): Promise<number>;
  batonReleaseTurnLock(key: string, pendingKey: string, token: string): Promise<number>;
  /** `keys`: the number of keys, then per agent its lock key and its pending wake-up key. */
  batonWakeHolderIfHeld(keys: number, ...keysThenPendingMs: Array<string | number>): Promise<number[]>;
};

/**
 * How a release went: `released`; `recheck` (released and took a pending wake-up: while it was
 * held someone committed work for the agent and found the lock taken, so look at Postgres
 * again); `not_held` (the lock was lost or had expired: nothing deleted, and nothing is known
 * about pending wake-ups).
 */
export type LockRelease = 'released' | 'recheck' | 'not_held';

/** The per-agent commands eachAnswer sends, on the client or inside a pipeline. */
type OneSlotCommands = { exists(...keys: string[]): unknown };

/** A held turn lock. `signal` aborts the moment ownership can no longer be proven. */
export interface TurnLock {
  readonly agentId: string;
  readonly token: string;
  /**
   * This acquisition's fencing number: it only grows per agent (also across a wiped Redis).
   * The attempt reservation records it and Postgres refuses one older than the agent's last.
   */
  readonly fence: bigint;
  readonly signal: AbortSignal;
  /**
   * Asks Redis, within a bounded time, whether this holder still owns the lock, and whether
   * enough of its lifetime is left to start a write. Called right before every adapter write;
   * false (also when Redis cannot answer in time) means: do not write.
   */
  stillHeld(): Promise<boolean>;
  /** Stops extending and deletes the lock if this holder still owns it. */
  release(): Promise<LockRelease>;
}

export interface TurnLocksOptions {
  readonly ttlMs: number;
  readonly logger: Logger;
  /**
   * Longest wait for any lock command (default ttl/3): a partitioned holder learns within the
   * lock's lifetime that it can no longer prove ownership, and stops.
   */
  readonly commandTimeoutMs?: number;
}

class LockCommandTimeout extends Error {
  constructor(ms: number) {
    super(`turn lock command got no answer within ${ms} ms`);
    this.name = 'LockCommandTimeout';
  }
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
 *
 * Every command is bounded (`commandTimeoutMs`): a holder cut off from Redis never waits on
 * it longer than that, and counts its lock as lost once it has gone a whole ttl, measured from
 * when its last successful extension was SENT, without proving ownership. Give it a connection
 * that does not queue commands forever (open-redis.ts role `locks`).
 */
export class TurnLocks {
  private readonly redis: RedisClient & LockCommands;
  private readonly commandTimeoutMs: number;

  constructor(
    redis: RedisClient,
    private readonly names: RedisNames,
    private readonly opts: TurnLocksOptions,
  ) {
    this.commandTimeoutMs = opts.commandTimeoutMs ?? Math.max(TURN_LOCK_DEFAULTS.minRoundMs, Math.floor(opts.ttlMs / 3));
    const r = redis as RedisClient & Partial<LockCommands>;
    if (typeof r.batonAcquireTurnLock !== 'function') {
      redis.defineCommand('batonAcquireTurnLock', { numberOfKeys: 3, lua: ACQUIRE });
      redis.defineCommand('batonExtendTurnLock', { numberOfKeys: 1, lua: EXTEND });
      redis.defineCommand('batonReleaseTurnLock', { numberOfKeys: 2, lua: RELEASE });
      // Its number of keys varies (two per agent): the caller passes it first.
      redis.defineCommand('batonWakeHolderIfHeld', { lua: WAKE_HOLDER_IF_HELD });
    }
    this.redis = redis as RedisClient & LockCommands;
  }

  /** Runs one lock command, failing after commandTimeoutMs whatever the connection does. */
  private bounded<T>(command: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new LockCommandTimeout(this.commandTimeoutMs)), this.commandTimeoutMs);
    });
    return Promise.race([command, timeout]).finally(() => clearTimeout(timer));
  }

  /**
   * Tries once; never waits longer than one bounded command. Throws when Redis cannot answer.
   * When the lock is held, leaves the holder a pending wake-up (see LockRelease): whatever the
   * caller was woken for is then looked at by the holder after its release.
   */
  async acquire(agentId: string): Promise<AcquireResult> {
    const key = this.names.turnLock(agentId);
    const token = randomUUID();
    const sentAt = Date.now();
    const [ok, holder, third] = await this.bounded(
      this.redis.batonAcquireTurnLock(
        key,
        this.names.turnFence(agentId),
        this.names.pendingWakeUp(agentId),
        token,
        this.opts.ttlMs,
        TURN_LOCK_DEFAULTS.pendingWakeUpMs,
      ),
    );
    if (ok !== 1) {
      // pttl -1/-2: no expiry or just vanished; retry soon either way.
      const retryInMs = typeof third === 'number' && third > 0 ? third : TURN_LOCK_DEFAULTS.retryFallbackMs;
      return { acquired: false, holder: holder ?? null, retryInMs };
    }
    return { acquired: true, lock: this.hold(agentId, key, token, BigInt(third ?? 0), sentAt) };
  }

  private hold(agentId: string, key: string, token: string, fence: bigint, acquiredAt: number): TurnLock {
    const controller = new AbortController();
    const { ttlMs, logger } = this.opts;
    // When the last proof of ownership was sent: Redis set the expiry no earlier than this, so
    // the lock is ours until at least confirmedAt + ttl.
    let confirmedAt = acquiredAt;
    let released = false;
    let extending = false;
    const timer = setInterval(
      () => {
        if (released) return;
        // Checked whether or not an extension is in flight: a command that hangs (a partition)
        // must not keep the holder believing in a lock that has expired in Redis.
        if (Date.now() - confirmedAt >= ttlMs) {
          lose('the turn lock could not be extended within its lifetime');
          return;
        }
        if (extending) return;
        extending = true;
        const sentAt = Date.now();
        this.bounded(this.redis.batonExtendTurnLock(key, token, ttlMs))
          .then((ok) => {
            if (ok === 1) confirmedAt = Math.max(confirmedAt, sentAt);
            else lose('the turn lock was taken over or expired');
          })
          .catch((err: unknown) => {
            if (Date.now() - confirmedAt >= ttlMs) lose('the turn lock could not be extended');
            else logger.warn({ err, agentId }, 'turn lock extension failed; retrying');
          })
          .finally(() => {
            extending = false;
          });
      },
      Math.max(TURN_LOCK_DEFAULTS.minRoundMs, Math.floor(ttlMs / 3)),
    );
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
      fence,
      signal: controller.signal,
      stillHeld: async () => {
        if (released || controller.signal.aborted) return false;
        const sentAt = Date.now();
        try {
          // At least half its lifetime proven left (the timer renews it every third): the token
          // read back proves ownership, one command instead of a script's three. Otherwise
          // PEXPIRE-if-owner proves it and renews the lifetime for the write ahead.
          const renew = confirmedAt + ttlMs - sentAt < ttlMs / 2;
          const owned = renew
            ? (await this.bounded(this.redis.batonExtendTurnLock(key, token, ttlMs))) === 1
            : (await this.bounded(this.redis.get(key))) === token;
          if (!owned) {
            lose('the turn lock was taken over or expired');
            return false;
          }
          if (renew) confirmedAt = Math.max(confirmedAt, sentAt);
          return !controller.signal.aborted;
        } catch (err) {
          logger.warn({ err, agentId }, 'could not prove turn lock ownership before a write');
          return false;
        }
      },
      release: async (): Promise<LockRelease> => {
        if (released) return 'not_held';
        released = true;
        clearInterval(timer);
        if (controller.signal.aborted) return 'not_held';
        try {
          const n = await this.bounded(this.redis.batonReleaseTurnLock(key, this.names.pendingWakeUp(agentId), token));
          return n === 2 ? 'recheck' : n === 1 ? 'released' : 'not_held';
        } catch (err) {
          // The key expires on its own within ttl; nothing else to do.
          logger.warn({ err, agentId }, 'turn lock release failed; it will expire');
          return 'not_held';
        }
      },
    };
  }

  /** Which of the agents have a turn lock held right now (see existsEach). */
  async held(agentIds: readonly string[]): Promise<boolean[]> {
    return this.existsEach(agentIds.map((id) => [this.names.turnLock(id)]));
  }

  /**
   * Which of the agents have a turn lock held right now, leaving each holder a pending wake-up in
   * the same atomic step (wake-holder-if-held.lua). For a producer that has just committed work for
   * the agents and adds no wake-up for those whose turn is held: their holder looks at Postgres
   * again after releasing. Bounded like every lock command. On one server, one script run for
   * all the agents (a pipeline of one call per agent costs Redis more commands per agent); on a
   * cluster, whose agents lie in many slots, one call per agent.
   */
  async wakeHolderIfHeld(agentIds: readonly string[]): Promise<boolean[]> {
    if (agentIds.length === 0) return [];
    const keys = (ids: readonly string[]) => ids.flatMap((id) => [this.names.turnLock(id), this.names.pendingWakeUp(id)]);
    const redis = this.redis;
    const answers =
      redis instanceof Cluster
        ? (
            await this.bounded(
              Promise.all(agentIds.map((id) => redis.batonWakeHolderIfHeld(2, ...keys([id]), TURN_LOCK_DEFAULTS.pendingWakeUpMs))),
            )
          ).map((a) => a[0])
        : await this.bounded(redis.batonWakeHolderIfHeld(agentIds.length * 2, ...keys(agentIds), TURN_LOCK_DEFAULTS.pendingWakeUpMs));
    return agentIds.map((_, i) => answers[i] === 1);
  }

  /**
   * Which of the agents are busy for the reconciler: a turn lock is held, or the agent is
   * backing off. Its two keys share the agent's hash tag, so one EXISTS covers both.
   */
  async busy(agentIds: readonly string[]): Promise<boolean[]> {
    return this.existsEach(agentIds.map((id) => [this.names.turnLock(id), this.names.backoff(id)]));
  }

  /** One EXISTS per group of keys (each group in one slot), answered as eachAnswer does. */
  private async existsEach(groups: ReadonlyArray<readonly string[]>): Promise<boolean[]> {
    return (await this.eachAnswer(groups.map((keys) => (r) => r.exists(...keys)))).map((n) => n > 0);
  }

  /**
   * One command per agent (each touching one slot), answered in one bounded wait: on a single
   * server as one pipeline (one round trip); on a cluster, where the agents lie in many slots and
   * a pipeline may not span nodes, sent all at once, each to its node. A command that failed
   * inside the pipeline answers 0.
   */
  private async eachAnswer(commands: ReadonlyArray<(r: OneSlotCommands) => unknown>): Promise<number[]> {
    if (commands.length === 0) return [];
    if (this.redis instanceof Cluster) {
      const redis = this.redis;
      return this.bounded(Promise.all(commands.map((command) => command(redis) as Promise<number>)));
    }
    const pipeline = this.redis.pipeline() as unknown as OneSlotCommands & { exec(): Promise<Array<[Error | null, unknown]> | null> };
    for (const command of commands) command(pipeline);
    const results = (await this.bounded(pipeline.exec())) ?? [];
    return results.map(([err, n]) => (!err && typeof n === 'number' ? n : 0));
  }

  /**
   * Marks the agent as backing off for `ms`: the reconciler's sweep leaves it alone until then
   * (its own due job wakes it). Lost with Redis, which only makes the next sweep look sooner.
   */
  async backOff(agentId: string, ms: number): Promise<void> {
    await this.bounded(this.redis.set(this.names.backoff(agentId), '1', 'PX', Math.max(1, Math.round(ms))));
  }

  /**
   * Takes the reconciler lead for `ms` if nobody holds it: one process runs each pass. The key
   * is not released: it simply expires, so a leader that dies costs at most one interval.
   */
  async tryLeadReconciler(group: string, holder: string, ms: number): Promise<boolean> {
    return (await this.bounded(this.redis.set(this.names.reconcilerLeader(group), holder, 'PX', Math.max(1, ms), 'NX'))) === 'OK';
  }
}
