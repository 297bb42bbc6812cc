/**
 * The tunable numbers of Baton's components that are not environment variables: one frozen,
 * validated object per component, each value with its doc line. A component's option (e.g.
 * `opts.pollMs`) falls back to its entry here, never to a second literal; tests pass shorter
 * values through those options. A number an operator sets is an environment variable instead
 * (int-settings.ts, the README tables); the components' defaults that are also variables'
 * defaults (database timeouts, reconciliation windows) live in libs/domain and are re-exported
 * here. Pure data: it imports only libs/domain, so every layer may import it.
 */
export { DEFAULT_DATABASE_TIMEOUTS } from '../domain/database-timeouts.ts';
export { DEFAULT_DELIVERY_WINDOWS, DELIVERY_POLICY } from '../domain/delivery-policy.ts';

/**
 * Freezes a component's defaults after checking that each is a whole number >= 0: a mistyped
 * default fails at import, naming the component and the key, instead of timing things oddly.
 */
export function componentDefaults<T extends Record<string, number>>(component: string, values: T): Readonly<T> {
  for (const [key, value] of Object.entries(values)) {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${component}.${key} must be a whole number >= 0, got ${value}`);
  }
  return Object.freeze(values);
}

/** Redis connections (libs/queue/open-redis.ts). */
export const REDIS_CLIENT_DEFAULTS = componentDefaults('redis client', {
  /** A producer (API, CLI) gives up on a command after this long (or one reconnect attempt). */
  producerCommandTimeoutMs: 1_500,
  /** A lock connection's command deadline, when the caller gives none. */
  lockCommandTimeoutMs: 1_000,
  /** Longest wait for a TCP connection to Redis. */
  connectTimeoutMs: 3_000,
  /** Longest pause between reconnect attempts (the back-off doubles from 100 ms up to it). */
  maxReconnectDelayMs: 2_000,
});

/** The per-agent turn lock (libs/locks/turn-locks.ts); its lifetime is BATON_TURN_LOCK_TTL_MS. */
export const TURN_LOCK_DEFAULTS = componentDefaults('turn lock', {
  /**
   * How long a pending wake-up lives. A turn may hold its lock for an hour, and the pending wake-up must last
   * until the holder releases and takes it; the expiry only bounds what is left by a holder that
   * lost its lock (it costs the next holder one more look at Postgres).
   */
  pendingWakeUpMs: 24 * 3_600_000,
  /** Floor of the extension period and command deadline, both ttl/3 otherwise. */
  minRoundMs: 50,
  /** What a refused acquire waits when the lock script names no expiry. */
  retryFallbackMs: 50,
});

/** The delivery worker (workers/delivery/start-delivery-worker.ts, libs/handoffs dispatch). */
export const DELIVERY_WORKER_DEFAULTS = componentDefaults('delivery worker', {
  /** How stale the runtime settings a worker acts on may be. */
  settingsMaxAgeMs: 1_000,
  /** Back-off before asking a busy session again (the first wait; DELIVERY_POLICY grows it). */
  busyRetryMs: 1_000,
  /** Back-off after the provider could not be reached (the first wait; DELIVERY_POLICY grows it). */
  unreachableRetryMs: 2_000,
  /** Back-off while a provider's outage guard says it is down. */
  outageRetryMs: 5_000,
  /** How often a watcher re-reads its handoff, to notice a release by a person. */
  recheckMs: 2_000,
  /** How long after a dispatch run failed outright (Postgres unreachable) its agent is woken again. */
  failedRunRetryMs: 1_000,
});

/** The event log's follower (libs/handoffs/event-feed.ts). */
export const EVENT_FEED_DEFAULTS = componentDefaults('event feed', {
  /** An id older than this is final even if a transaction that might precede it is still open. */
  finalAfterMs: 10_000,
  /** How often the log is checked although no append arrived (a lost XADD), while anyone follows. */
  checkEveryMs: 15_000,
  /** How soon the horizon is checked again while a transaction it waits for may still commit. */
  recheckMs: 25,
});

/** The API's cache of proven tokens (libs/handoffs/token-cache.ts). */
export const TOKEN_CACHE_DEFAULTS = componentDefaults('token cache', {
  /** A cached token is proven again against Postgres after this long. */
  maxAgeMs: 1_000,
  /** Tokens kept at most (the oldest goes first). */
  maxEntries: 10_000,
});

/** The reconciler's steps (workers/timers/start-reconciler.ts, libs/handoffs); their pace is BATON_RECONCILE_INTERVAL_MS. */
export const RECONCILER_DEFAULTS = componentDefaults('reconciler', {
  /** Recipients one sweep for work Redis lost looks at; the rest are taken in the next one. */
  sweepBatch: 5_000,
  /** Longest a sweep holds back re-queuing an agent because its queue has wake-ups waiting. */
  sweepHoldBackMs: 30_000,
  /** HELD handoffs read per statement when holds are lifted: one keyset page. */
  holdsPageSize: 500,
  /**
   * UNCERTAIN looks of one provider at a time. Each look is bounded by its adapter's observe
   * deadline (BATON_ADAPTER_DEADLINES `observeMs`), so at most this many wait on it at once.
   */
  observationsPerProvider: 8,
  /** A failing step is logged on its first failure and on every this-many-th after it. */
  logEveryFailures: 30,
});

/** The API's server-sent event streams (services/api/routes/events). */
export const EVENT_STREAM_DEFAULTS = componentDefaults('event stream', {
  /** Bytes a stream may have written but its client not yet read before its next events end it with its resume id. */
  maxBufferBytes: 1 << 20,
  /** How long a stream waits for its client to read before the next page of a catch-up; past it, ended. */
  slowReaderMs: 30_000,
  /** How often the stream's token (or browser session) is proven again: it ends within this after a revocation. */
  recheckMs: 5_000,
  /** An SSE comment this often keeps proxies and clients from timing the stream out. */
  heartbeatMs: 15_000,
  /** What a browser's EventSource waits before it reconnects (sent as `retry:`). */
  retryMs: 2_000,
});

/** The API server (services/api); its database timeouts are BATON_DB_*_TIMEOUT_MS. */
export const API_DEFAULTS = componentDefaults('api', {
  /** Deadline of each of `/health`'s checks (Postgres, Redis). */
  healthCheckTimeoutMs: 1_500,
  /** How often a token's last_used_at is written (at most), so reads stay reads. */
  tokenTouchEveryMs: 60_000,
  /** How long a browser session lives after sign-in (it is not extended by use). */
  browserSessionTtlMs: 60 * 60 * 1000,
  /** How long Bull Board's list of queues is reused before the agents table is asked again. */
  queueListTtlMs: 2_000,
});

/** Client-side group commit of the repositories' batched statements (libs/db/batched-statements.ts). */
export const GROUP_COMMIT_DEFAULTS = componentDefaults('group commit', {
  /** Batches of one statement kind in flight at once, at most (and at most half the pool). */
  maxBatchesInFlight: 4,
});

/** The Postgres pool (libs/db/open-database.ts); its size and timeouts are variables. */
export const DATABASE_POOL_DEFAULTS = componentDefaults('database pool', {
  /** An idle connection is closed after this long. */
  idleTimeoutMs: 30_000,
});

/** The webhook adapter (libs/adapters/webhook). */
export const WEBHOOK_ADAPTER_DEFAULTS = componentDefaults('webhook adapter', {
  /** Deadline of one HTTP exchange when the agent's settings name none. */
  timeoutMs: 30_000,
  /** Bytes of an answer read at most. */
  maxAnswerBytes: 256 * 1024,
  /** How often a followed turn is looked at. */
  pollMs: 1_000,
});

/** The command adapter (libs/adapters/command). */
export const COMMAND_ADAPTER_DEFAULTS = componentDefaults('command adapter', {
  /** How often a run this process did not start is looked at while followed. */
  pollMs: 250,
  /** Between SIGTERM and SIGKILL of a program past its deadline. */
  killGraceMs: 5_000,
  /** How long `sendTurn` waits for the supervisor to start the program before abandoning the start. */
  startWaitMs: 5_000,
});

/** The claude_code adapter (libs/adapters/claude-code). */
export const CLAUDE_CODE_ADAPTER_DEFAULTS = componentDefaults('claude_code adapter', {
  /** How often a run this process did not start is looked at while followed. */
  pollMs: 250,
  /** Between SIGTERM and SIGKILL of a claude past its deadline. */
  killGraceMs: 5_000,
  /** How long `sendTurn` waits for the supervisor to start claude before abandoning the start. */
  startWaitMs: 5_000,
});

/** The codex adapter (libs/adapters/codex). */
export const CODEX_ADAPTER_DEFAULTS = componentDefaults('codex adapter', {
  /** How often a turn this worker did not start is looked at while followed. */
  pollMs: 500,
  /** How long starting the app-server daemon (if needed), connecting and `initialize` may take. */
  startTimeoutMs: 25_000,
});

/** The outage guard's status check (libs/adapters/provider-status.ts). */
export const PROVIDER_STATUS_DEFAULTS = componentDefaults('provider status', {
  /** A status page's answer is reused for this long. */
  cacheMs: 5_000,
  /** Deadline of one status page fetch. */
  timeoutMs: 2_000,
});

/** Every component's defaults object by its exported name (the table in libs/config/README.md is generated from it). */
export const COMPONENT_DEFAULTS: Readonly<Record<string, Readonly<Record<string, number>>>> = Object.freeze({
  REDIS_CLIENT_DEFAULTS,
  TURN_LOCK_DEFAULTS,
  DELIVERY_WORKER_DEFAULTS,
  RECONCILER_DEFAULTS,
  EVENT_FEED_DEFAULTS,
  TOKEN_CACHE_DEFAULTS,
  EVENT_STREAM_DEFAULTS,
  API_DEFAULTS,
  GROUP_COMMIT_DEFAULTS,
  DATABASE_POOL_DEFAULTS,
  WEBHOOK_ADAPTER_DEFAULTS,
  COMMAND_ADAPTER_DEFAULTS,
  CLAUDE_CODE_ADAPTER_DEFAULTS,
  CODEX_ADAPTER_DEFAULTS,
  PROVIDER_STATUS_DEFAULTS,
});
