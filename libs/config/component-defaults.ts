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

import { componentDefaults } from './validated-defaults.ts';
import {
  WEBHOOK_ADAPTER_DEFAULTS,
  DEMO_ADAPTER_DEFAULTS,
  COMMAND_ADAPTER_DEFAULTS,
  CLAUDE_CODE_ADAPTER_DEFAULTS,
  CODEX_ADAPTER_DEFAULTS,
  PROVIDER_STATUS_DEFAULTS,
} from './adapter-defaults.ts';

export { componentDefaults } from './validated-defaults.ts';
export {
  WEBHOOK_ADAPTER_DEFAULTS,
  DEMO_ADAPTER_DEFAULTS,
  COMMAND_ADAPTER_DEFAULTS,
  CLAUDE_CODE_ADAPTER_DEFAULTS,
  CODEX_ADAPTER_DEFAULTS,
  PROVIDER_STATUS_DEFAULTS,
} from './adapter-defaults.ts';

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
  /** How long a cluster client that just opened may take to learn its nodes before its keys are scanned. */
  clusterReadyTimeoutMs: 10_000,
  /** Keys one SCAN asks a server for (its COUNT hint). */
  scanCount: 1_000,
  /** Deadline of the start's one question to a `redis+cluster://` URL's seed nodes: are they cluster nodes? */
  clusterCheckTimeoutMs: 2_000,
});

/** The Redis stream that wakes the API's event followers (libs/queue/event-stream.ts). */
export const REDIS_EVENT_STREAM_DEFAULTS = componentDefaults('redis event stream', {
  /** Entries the stream keeps (XADD MAXLEN ~): a wake-up needs none of the old ones. */
  maxLen: 10_000,
  /** How long one XREAD of the API's reader blocks before it asks again. */
  readBlockMs: 5_000,
  /** Entries one XREAD returns at most (their highest event id is all a wake-up uses). */
  readCount: 1_000,
  /** The reader's pause after a Redis error before it reads again. */
  readRetryMs: 500,
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
  /** How stale a worker's view of the budgets and what their turns spent may be (budget-gate.ts). */
  budgetMaxAgeMs: 1_000,
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
  /**
   * Runs of one shard queue in one process that may be at work at once (a run that only follows
   * a turn running in its session does not count), when BATON_WORKER_CONCURRENCY is larger.
   * Under a backlog every slot holds a run, and each holds its agent's turn lock while it waits
   * for the event loop and a database connection: more at work mean more lock extensions, fewer
   * lose the batching of takes and head look-ups (docs/performance-history.md, "Kept templates
   * that were not kept, signals that follow, runs that follow").
   */
  workingRunsPerQueue: 32,
  /** How long a wake job lingers once the wake-up set is empty while runs it started go on (WAKE_LINGER, workers/delivery/drain-wake-ups.ts). */
  wakeLingerMs: 50,
  /** ...looking at the set again this often, or when one of its runs ends. */
  wakeLingerPollMs: 10,
  /** A wake job whose slots were full takes agents again once this many slots are free (WAKE_REFILL)... */
  wakeRefillBatch: 16,
  /** ...or this long after the first one freed, whichever comes first. */
  wakeRefillWaitMs: 20,
  /** How many of a session's newest turns are read for the notice of earlier unanswered requests (older ones are not named). */
  earlierTurnsLookBack: 50,
  /** Reads of what committed that settling a reservation in doubt tries while Postgres is away, before it pauses the run. */
  settleTries: 30,
  /** Request ids reserved but not yet handed to an adapter that a process remembers at most (the oldest are forgotten: those go the UNCERTAIN way). */
  unwrittenKept: 10_000,
});

/** The event log's follower (libs/handoffs/event-feed.ts). */
export const EVENT_FEED_DEFAULTS = componentDefaults('event feed', {
  /** An id older than this is final even if a transaction that might precede it is still open. */
  finalAfterMs: 10_000,
  /** How often the log is checked although no append arrived (a lost XADD), while anyone follows. */
  checkEveryMs: 15_000,
  /** How soon the horizon is checked again while a transaction it waits for may still commit. */
  recheckMs: 25,
  /** Events read per statement while catching up (the log's, and each follower's visible ones). */
  pageSize: 500,
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
  /** Expired claims one lease-expiry step reads and expires; the rest wait for the next step. */
  leaseExpiryBatch: 200,
  /** Overdue handoffs one reminders step reminds; the rest wait for the next step. */
  remindersBatch: 500,
  /** Due UNCERTAIN handoffs one look-up for free observation slots returns at most (fewer when the free slots of the worker's providers are fewer). */
  uncertainDuePage: 100,
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
/** The A2A gateway (services/api/routes/a2a). */
export const A2A_DEFAULTS = componentDefaults('a2a gateway', {
  /** How long a blocking SendMessage (`returnImmediately` false) waits for its task to be final or input-required; then it answers with the task as it is. */
  blockingSendMs: 60_000,
});

export const API_DEFAULTS = componentDefaults('api', {
  /** Deadline of each of `/health`'s checks (Postgres, Redis). */
  healthCheckTimeoutMs: 1_500,
  /** How often a token's last_used_at is written (at most), so reads stay reads. */
  tokenTouchEveryMs: 60_000,
  /** How long a browser session lives after sign-in (it is not extended by use). */
  browserSessionTtlMs: 60 * 60 * 1000,
  /** How long Bull Board's list of queues is reused before the agents table is asked again. */
  queueListTtlMs: 2_000,
  /** The `Retry-After` of a 503 (Postgres or Redis unavailable), in seconds. */
  unavailableRetryAfterSeconds: 2,
});

/** Client-side group commit of the repositories' batched statements (libs/db/batched-statements.ts). */
export const GROUP_COMMIT_DEFAULTS = componentDefaults('group commit', {
  /** Batches of one statement kind in flight at once, at most (and at most half the pool). */
  maxBatchesInFlight: 4,
  /** Enrollments of sent handoffs per statement (enrollMany). */
  enrollMaxBatch: 64,
  /** Reserving head look-ups per statement (nextWorkMany). */
  lookUpMaxBatch: 32,
  /** Turn ends per statement (transitionBatch); the statement's text bounds its input rows by it too. */
  turnEndMaxBatch: 32,
});

/**
 * The repositories' caches of what statements they built (libs/db). A process uses a few dozen
 * transition shapes and a few hundred statements: each bound only stops a surprise from growing
 * without end (what is past it is built again each time, not kept).
 */
export const STATEMENT_CACHE_DEFAULTS = componentDefaults('statement caches', {
  /** Transition statement texts kept, one per shape (libs/db/handoff-sql/build-transition.ts). */
  transitionTexts: 512,
  /** Row templates kept per client's type parsers (libs/db/row-templates.ts). */
  rowTemplates: 2_000,
});

/** The Postgres pool (libs/db/open-database.ts); its size and timeouts are variables. */
export const DATABASE_POOL_DEFAULTS = componentDefaults('database pool', {
  /** An idle connection is closed after this long. */
  idleTimeoutMs: 30_000,
});

/** The HTTP client of the API (libs/api-client), used by the CLI and `baton mcp`. */
export const API_CLIENT_DEFAULTS = componentDefaults('api client', {
  /** Tries in all of a send that carries an idempotency key (`SEND_RETRY`), the first included. */
  sendAttempts: 4,
  /** Wait before a send's first retry; it doubles per retry (or the answer's Retry-After if longer)... */
  sendRetryFirstMs: 250,
  /** ...up to this. */
  sendRetryMaxMs: 2_000,
});

/** The deployment's metrics, computed at scrape time (libs/metrics/deployment-metrics.ts). */
export const DEPLOYMENT_METRICS_DEFAULTS = componentDefaults('deployment metrics', {
  /** Transitions read per statement while catching up with the event log. */
  transitionsPage: 5_000,
  /** Transitions read at most per scrape (the next scrape goes on from there). */
  transitionsPerScrape: 200_000,
  /** Agents with open work whose turn locks one scrape asks Redis about, at most. */
  lockAgentsMax: 10_000,
});

/** The Postgres and Redis that `baton demo` (and the test and benchmark harnesses) start themselves (libs/processes/embedded-infra.ts). */
export const EMBEDDED_INFRA_DEFAULTS = componentDefaults('embedded infrastructure', {
  /** How long an embedded postmaster may take to accept connections. */
  postgresStartMs: 30_000,
  /** How long a stopped postmaster may take to exit before it is killed (SIGKILL)... */
  postgresStopMs: 10_000,
  /** ...and how long its exit is then waited for. */
  postgresKillWaitMs: 2_000,
  /** How long a private redis-server may take to accept connections... */
  redisStartMs: 10_000,
  /** ...tried this often. */
  redisStartPollMs: 50,
  /** How long a stopped redis-server may take to exit before it is killed. */
  redisStopMs: 3_000,
});

/** The `baton` command (services/cli): its clients, its checks, and the processes it starts. */
export const CLI_DEFAULTS = componentDefaults('cli', {
  /** An event stream that sent nothing for this long is reopened: three of the server's heartbeats missed. */
  streamIdleMs: 3 * EVENT_STREAM_DEFAULTS.heartbeatMs,
  /** Pause before an event stream that ended is reopened. */
  streamReconnectMs: 1_000,
  /** Default deadline of each network check of `baton doctor` (`--timeout <ms>`): a connection and each of its commands. */
  doctorTimeoutMs: 3_000,
  /** How long `<binary> --version` may take in `baton doctor` (node-based CLIs start slowly on a loaded host). */
  versionTimeoutMs: 10_000,
  /** Longest pause between two tries of Postgres or Redis at start (BATON_START_TIMEOUT_MS bounds the whole wait). */
  startRetryMaxMs: 1_000,
  /** After the shutdown grace, how long a stuck force-close may keep the process up before it exits 1 anyway. */
  shutdownBackstopMs: 3_000,
  /** How often `baton demo` prints its running summary line. */
  demoSummaryEveryMs: 5_000,
});

/** The subscription dispatcher of every worker process (libs/handoffs/subscription-dispatcher.ts). */
export const SUBSCRIPTION_DEFAULTS = componentDefaults('subscriptions', {
  /** How often the dispatcher looks at the event log although no stream entry woke it (a lost XADD). */
  checkEveryMs: 1_000,
  /** How soon the log's horizon is read again while a transaction writing events may still commit. */
  recheckMs: 5,
  /** The shortest time between two passes of one dispatcher, however often the event stream wakes it. */
  minPassGapMs: 25,
  /** How long an id below the log's top may stay invisible before it is taken as never coming (as the event feed). */
  finalAfterMs: 10_000,
  /** Subscriptions one worker leases in one pass. */
  leaseBatch: 16,
  /**
   * How long a lease lasts; every delivery renews it. A worker that died holds its subscriptions
   * up to this long. More than requestTimeoutMs, so a live deliverer never loses its lease mid-POST.
   */
  leaseMs: 15_000,
  /** Events read from the log in one page. */
  pageSize: 500,
  /** Deadline of one POST (connect, headers and body); past it the attempt failed and is retried. */
  requestTimeoutMs: 10_000,
  /** Attempts at one event (timeouts, 5xx, 429, refused connections) before it goes to the dead letters. */
  maxAttempts: 8,
  /** The first retry's delay; each further one doubles it, with full jitter. */
  backoffBaseMs: 1_000,
  /** The longest delay between two attempts (a Retry-After longer than this is cut to it). */
  backoffMaxMs: 300_000,
  /** A subscription whose deliveries fail without one 2xx for this long is paused (1 hour). */
  pauseAfterMs: 3_600_000,
  /** Characters of a receiver's error answer kept as the last error. */
  errorChars: 200,
});

/** Every component's defaults object by its exported name (the table in libs/config/README.md is generated from it). */
export const COMPONENT_DEFAULTS: Readonly<Record<string, Readonly<Record<string, number>>>> = Object.freeze({
  REDIS_CLIENT_DEFAULTS,
  REDIS_EVENT_STREAM_DEFAULTS,
  TURN_LOCK_DEFAULTS,
  DELIVERY_WORKER_DEFAULTS,
  RECONCILER_DEFAULTS,
  EVENT_FEED_DEFAULTS,
  TOKEN_CACHE_DEFAULTS,
  EVENT_STREAM_DEFAULTS,
  API_DEFAULTS,
  A2A_DEFAULTS,
  GROUP_COMMIT_DEFAULTS,
  STATEMENT_CACHE_DEFAULTS,
  DATABASE_POOL_DEFAULTS,
  WEBHOOK_ADAPTER_DEFAULTS,
  DEMO_ADAPTER_DEFAULTS,
  API_CLIENT_DEFAULTS,
  COMMAND_ADAPTER_DEFAULTS,
  CLAUDE_CODE_ADAPTER_DEFAULTS,
  CODEX_ADAPTER_DEFAULTS,
  PROVIDER_STATUS_DEFAULTS,
  DEPLOYMENT_METRICS_DEFAULTS,
  EMBEDDED_INFRA_DEFAULTS,
  CLI_DEFAULTS,
  SUBSCRIPTION_DEFAULTS,
});
