/**
 * Every Redis key, BullMQ queue name and job id Baton uses comes from here, so a prefix per
 * deployment (or per test) isolates everything, and Redis Cluster placement is decided in one
 * place:
 *   - a delivery queue's keys share the hash tag `{<queue>}` (BullMQ needs a queue's keys in one
 *     slot), and different queues land in different slots, spreading load over the cluster;
 *   - an agent's turn lock and its fence counter share the hash tag `{<agentId>}`, because the
 *     acquire script touches both.
 * Queue names may not contain ':' (BullMQ joins its keys with it).
 */
export class RedisNames {
  constructor(readonly prefix: string) {
    if (!/^[A-Za-z0-9_.-]+$/.test(prefix)) throw new Error(`invalid redis prefix ${JSON.stringify(prefix)}`);
  }

  /** The BullMQ `prefix` option. */
  get bullPrefix(): string {
    return this.prefix;
  }

  /**
   * The deployment these names belong to, recorded on every agent the deployment registers
   * (`agents.deployment`). It is the prefix itself: a deployment is exactly the set of
   * processes that share these queues and turn locks, so a worker may act on an agent only when
   * the agent's turn lock is one of these keys. Two deployments on one database therefore need
   * different prefixes, even on different Redis servers.
   */
  get deployment(): string {
    return this.prefix;
  }

  /**
   * The delivery queue of one provider shard of a worker pool: `{delivery-demo-3}` for the
   * unnamed pool, `{delivery-codex.host-a-3}` for pool `host-a` ('.' cannot occur in a provider
   * or pool name, so names never collide).
   */
  deliveryQueue(provider: string, shard: number, pool = ''): string {
    return pool === '' ? `{delivery-${provider}-${shard}}` : `{delivery-${provider}.${pool}-${shard}}`;
  }

  /**
   * A delivery queue's wake-up set: the agents whose queues a worker must look at, each with
   * when it was first woken (add-wake-ups.lua). In the queue's hash slot.
   */
  wakeUps(queue: string): string {
    return `${this.prefix}:${queue}:wake-ups`;
  }

  /**
   * The queue's scheduled flag: set while a wake job is queued for, or draining, the queue's
   * wake-up set (add-wake-ups.lua, take-wake-ups.lua). The key keeps the older name `wake-arm`
   * so that processes of two versions, during a rolling upgrade, test and set the same key.
   */
  wakeScheduled(queue: string): string {
    return `${this.prefix}:${queue}:wake-arm`;
  }

  /**
   * A sentinel key the reconciler's sweep keeps in a delivery queue's slot: when it is gone, that
   * queue's keys were lost (a wipe, a restarted node), so its waiting list says nothing about
   * which wake-ups survived. (The key keeps its older name, like the other keys renamed in code.)
   */
  queueSentinel(queue: string): string {
    return `${this.prefix}:${queue}:sweep-mark`;
  }

  /** The shard an agent's jobs go to: stable for the agent's lifetime (FNV-1a of its id). */
  shardOf(agentId: string, shards: number): number {
    let hash = 0x811c9dc5;
    for (let i = 0; i < agentId.length; i++) {
      hash ^= agentId.charCodeAt(i);
      hash = Math.imul(hash, 0x01000193);
    }
    return (hash >>> 0) % shards;
  }

  /** The lock that allows one active turn per agent across all worker processes. */
  turnLock(agentId: string): string {
    return `${this.prefix}:turn-lock:{${agentId}}`;
  }

  /** The agent's last fencing number (kept without expiry; same slot as its turn lock). */
  turnFence(agentId: string): string {
    return `${this.prefix}:turn-fence:{${agentId}}`;
  }

  /**
   * Left for an agent's turn-lock holder by whoever found the lock held after committing work
   * for the agent (a send, a wake-up job): the holder takes it when releasing and looks at
   * Postgres again (libs/locks/scripts). Same slot as the turn lock. The key keeps the older
   * name `turn-recheck` so that processes of two versions, during a rolling upgrade, agree.
   */
  pendingWakeUp(agentId: string): string {
    return `${this.prefix}:turn-recheck:{${agentId}}`;
  }

  /** Set while an agent backs off (busy session, unreachable or down provider): sweeps skip it. */
  backoff(agentId: string): string {
    return `${this.prefix}:backoff:{${agentId}}`;
  }

  /**
   * Where the API's request counters live (@fastify/rate-limit's Redis store appends the
   * subject to it), shared by every API process of the deployment.
   */
  get rateLimitNamespace(): string {
    return `${this.prefix}:rate-limit:`;
  }

  /**
   * One caller's request counter, after the namespace: its own hash tag, so the counters of
   * many callers spread over a cluster (the store's script touches one key).
   */
  rateLimitSubject(kind: 'token' | 'ip', id: string): string {
    return `{${kind}-${id}}`;
  }

  /**
   * One browser session of the API (services/api/plugins/browser-session.ts), by the sha256 of
   * its cookie value (so the keys do not hold usable cookies); its own hash tag, expiring with
   * the session.
   */
  browserSession(idHash: string): string {
    return `${this.prefix}:browser-session:{${idHash}}`;
  }

  /**
   * The Redis Stream every writer appends to after a commit of handoff events, and every API
   * process reads (XREAD BLOCK) to wake its `GET /v1/events` followers. One key, its own slot.
   */
  eventStream(): string {
    return `${this.prefix}:{events}:stream`;
  }

  /**
   * The pub/sub channel on which a process announces that a token may have ended (revoked, its
   * agent removed, its project deleted): every API process empties its token cache.
   */
  authChanged(): string {
    return `${this.prefix}:{auth}:changed`;
  }

  /**
   * Held by the one worker process that runs the reconciler pass this interval, per group of
   * workers serving the same providers (only they can scan those providers' histories).
   */
  reconcilerLeader(group: string): string {
    return `${this.prefix}:reconciler-leader:{${group}}`;
  }
}

/**
 * Deterministic job ids: a repeated enqueue of the same cause is a no-op, and every cause has
 * its own id so no wake-up is swallowed by a job that is already running.
 */
export const JOB_IDS = {
  /** A wake job: drain the queue's wake-up set (each has its own id; the scheduled flag keeps them few). */
  wake: (id: string) => `wake-${id}`,
  /** The handoff was just committed. */
  sent: (handoffId: string) => `sent-${handoffId}`,
  /** The turn lock `token` was released; its holder found more work. */
  afterTurn: (agentId: string, token: string) => `after-${agentId}-${token}`,
  /** The turn lock `token` was held when a job arrived; retry when it expires. */
  lockRetry: (agentId: string, token: string) => `lockretry-${agentId}-${token}`,
  /** Work becomes due at `atMs` (a delayed resend or a back-off), scheduled by lock run `token`. */
  dueAt: (agentId: string, atMs: number, token: string) => `due-${agentId}-${atMs}-${token}`,
  /** A hold on the handoff was lifted at this revision. */
  holdLifted: (handoffId: string, revision: number) => `lifted-${handoffId}-${revision}`,
  /** An UNCERTAIN turn was found in the session's history; resume following it. */
  observed: (handoffId: string, revision: number) => `observed-${handoffId}-${revision}`,
  /** A person released the handoff at this revision; the agent's queue may move on. */
  released: (handoffId: string, revision: number) => `released-${handoffId}-${revision}`,
  /** The worker that reserved an UNCERTAIN attempt proved it never wrote it, at this revision. */
  unsentProven: (handoffId: string, revision: number) => `unsent-${handoffId}-${revision}`,
  /** The reconciler found open work in sweep number `sweep`. */
  sweep: (agentId: string, sweep: number) => `sweep-${agentId}-${sweep}`,
} as const;
