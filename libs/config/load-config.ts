import { parseRedisTarget } from './redis-target.ts';
import { SUBSCRIPTION_ADDRESS_POLICIES, type SubscriptionAddressPolicy } from '../domain/subscription-policy.ts';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { POOL_PATTERN } from '../domain/ids.ts';
import { CODEX_ENV_NAMES, PROGRAM_ENV_NAMES, pickEnv } from '../domain/inherited-env.ts';
import type { DatabaseTimeouts } from '../domain/database-timeouts.ts';
import type { DeliveryWindows } from '../domain/delivery-policy.ts';
import { INT_SETTINGS, type IntSettingName } from './int-settings.ts';
import { allowedHostsOf, trustProxyOf, type TrustProxy } from './api-hosts.ts';
import { ConfigError } from './config-error.ts';

export { DEFAULT_HEAP_GROWTH_PERCENT } from './int-settings.ts';

/**
 * The only reader of process.env. `loadConfig` validates every variable once and returns a
 * frozen, typed object; entry points pass it (or parts of it) down. A bad value is reported
 * with the variable's name and what it accepts, and nothing starts.
 */
export interface BatonConfig {
  /** Postgres connection string; undefined means "none configured" (the demo embeds one). */
  readonly databaseUrl: string | undefined;
  /** Redis connection string; undefined means "none configured" (the demo starts one). */
  readonly redisUrl: string | undefined;
  /**
   * `allowedHosts`: the hostnames (lower case, no port; IPv6 in brackets) a browser may reach the
   * API by. Browser pages, sign-in and cookie sessions refuse any other Host (DNS rebinding).
   */
  readonly api: {
    readonly host: string;
    readonly port: number;
    readonly publicUrl: string;
    readonly allowedHosts: readonly string[];
    readonly trustProxy: TrustProxy;
  };
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Prefix of every Redis key and BullMQ queue Baton owns (no ':' allowed). */
  readonly redisPrefix: string;
  /** Delivery queues per provider; agents hash onto them. Fixed per deployment. */
  readonly queueShards: number;
  /** Providers this worker process runs adapters for. */
  readonly workerProviders: readonly string[];
  /**
   * Worker pools (host affinity) this worker process delivers to; '' is the unnamed pool.
   * An agent registered with `pool` gets turns only from workers of that pool.
   */
  readonly workerPools: readonly string[];
  /** The command provider: where run records live (they must survive a worker restart) and what programs inherit. */
  readonly command: { readonly runDir: string; readonly baseEnv: Readonly<Record<string, string>> };
  /** The claude_code provider: where its run records live (per host, surviving a worker restart) and what claude inherits. */
  readonly claudeCode: { readonly runDir: string; readonly baseEnv: Readonly<Record<string, string>> };
  /** The codex provider: what each `codex app-server` inherits (the login and threads are in the agent's Codex home). */
  readonly codex: { readonly baseEnv: Readonly<Record<string, string>> };
  /** Where webhook agents send their signed callbacks (Baton's API as they reach it). */
  readonly webhookCallbackUrl: string;
  /** Which addresses event subscriptions may be delivered to (BATON_SUBSCRIPTION_ADDRESSES; libs/domain/subscription-policy.ts). */
  readonly subscriptionAddresses: SubscriptionAddressPolicy;
  /** Deadlines of adapter calls per provider, over each provider's defaults (ms). */
  readonly adapterDeadlines: Readonly<Record<string, Partial<{ writeMs: number; observeMs: number; busyMs: number }>>>;
  /** Jobs one worker process runs at once per shard queue. */
  readonly workerConcurrency: number;
  /** Per-agent turn lock: time to live; it is extended every ttl/3 while the turn runs. */
  readonly turnLockTtlMs: number;
  /** BullMQ job lock and stall check: how fast a killed worker's job is taken over. */
  readonly jobLockMs: number;
  readonly stalledIntervalMs: number;
  /** How often the reconciler sweeps Postgres for work Redis lost. */
  readonly reconcileIntervalMs: number;
  /** On SIGTERM, how long running turns may take to finish before they are handed back. */
  readonly shutdownGraceMs: number;
  /**
   * How long `serve`, `api` and `worker` wait at start for Postgres and Redis to answer (tried
   * again with back-off) before they exit 1 with one line saying which did not.
   */
  readonly startTimeoutMs: number;
  /**
   * How far V8 lets the JavaScript heap grow past what the last full collection kept, in percent,
   * in the long-running processes (api, worker, serve); 0 leaves V8's own factor (up to 4x).
   */
  readonly heapGrowthPercent: number;
  readonly dbPoolSize: number;
  /** Longest wait for a connection and for each statement's reply before `database_unavailable`. */
  readonly dbTimeouts: DatabaseTimeouts;
  /** The reconciliation windows the delivery workers and their reconciler apply. */
  readonly deliveryWindows: DeliveryWindows;
  /** Where simulated (demo) agents live when not in this process. */
  readonly demoHostUrl: string | undefined;
  /** Project used when a request names none. */
  readonly defaultProject: string;
  /** The CLI's identity for commands that act as an agent (`--as` overrides it). */
  readonly agent: string | undefined;
  /** Where `baton init` writes the admin token and the CLI profile (mode 0600). */
  readonly home: string;
  /** The CLI's bearer token; when unset the CLI reads the profile file. */
  readonly token: string | undefined;
  /**
   * An admin token generated beforehand (`baton token generate`), which `baton db migrate`
   * registers once (a Kubernetes Secret holds it; it is never logged).
   */
  readonly adminToken: string | undefined;
  /**
   * The deadline of every call the CLI and `baton mcp` make to the API (and of an event
   * stream's wait for its headers): past it the answer counts as lost.
   */
  readonly clientTimeoutMs: number;
  /** The CLI profile: JSON with `token` (or `tokenFile`), and optionally `url` and `project`. */
  readonly profilePath: string;
  /**
   * Per-token request rate the API allows, shared by every API process through Redis: `burst`
   * calls per window of burst/perSecond seconds (perSecond 0 turns the limit off).
   */
  readonly rateLimit: { readonly perSecond: number; readonly burst: number };
  /** Where a worker process (`baton worker`) serves `GET /metrics`; undefined: not served. */
  readonly metricsPort: number | undefined;
  /** The variables that were set (non-empty), for commands whose defaults differ when unset. */
  readonly setVariables: readonly string[];
}

/**
 * Every variable `loadConfig` reads (besides the ones a provider's programs inherit:
 * libs/domain/inherited-env.ts). test/unit/config.test.ts holds it equal to what loadConfig actually reads;
 * the README's and this folder's configuration tables and docker-compose.yml are checked
 * against it (test/unit/docker-compose.test.ts).
 */
export const CONFIG_VARIABLES = [
  'DATABASE_URL',
  'REDIS_URL',
  'BATON_API_HOST',
  'BATON_API_PORT',
  'BATON_URL',
  'BATON_ALLOWED_HOSTS',
  'BATON_TRUST_PROXY',
  'BATON_LOG_LEVEL',
  'BATON_REDIS_PREFIX',
  'BATON_QUEUE_SHARDS',
  'BATON_WORKER_PROVIDERS',
  'BATON_WORKER_POOLS',
  'BATON_WORKER_CONCURRENCY',
  'BATON_ADAPTER_DEADLINES',
  'BATON_COMMAND_RUN_DIR',
  'BATON_CLAUDE_CODE_RUN_DIR',
  'BATON_WEBHOOK_CALLBACK_URL',
  'BATON_SUBSCRIPTION_ADDRESSES',
  'BATON_TURN_LOCK_TTL_MS',
  'BATON_JOB_LOCK_MS',
  'BATON_STALLED_INTERVAL_MS',
  'BATON_RECONCILE_INTERVAL_MS',
  'BATON_SHUTDOWN_GRACE_MS',
  'BATON_START_TIMEOUT_MS',
  'BATON_HEAP_GROWTH_PERCENT',
  'BATON_DB_POOL_SIZE',
  'BATON_DB_QUERY_TIMEOUT_MS',
  'BATON_DB_CONNECT_TIMEOUT_MS',
  'BATON_UNOBSERVABLE_AFTER_MS',
  'BATON_INTERRUPTED_RESEND_AFTER_MS',
  'BATON_ERROR_RESEND_AFTER_MS',
  'BATON_UNCERTAIN_SCANS',
  'BATON_UNCERTAIN_SCAN_WINDOW_MS',
  'BATON_UNREACHABLE_GIVE_UP_MS',
  'BATON_ROLE_REROUTE_AFTER_MS',
  'BATON_DEMO_HOST_URL',
  'BATON_PROJECT',
  'BATON_AGENT',
  'BATON_TOKEN',
  'BATON_ADMIN_TOKEN',
  'BATON_CLIENT_TIMEOUT_MS',
  'BATON_HOME',
  'BATON_PROFILE',
  'BATON_RATE_LIMIT_PER_SEC',
  'BATON_RATE_LIMIT_BURST',
  'BATON_METRICS_PORT',
] as const;

type Env = Readonly<Record<string, string | undefined>>;

function str(env: Env, name: string, fallback: string): string {
  const v = env[name];
  return v === undefined || v === '' ? fallback : v;
}

function optional(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

/** A whole-number variable, read with its default and bounds from INT_SETTINGS. */
function optionalInt(env: Env, name: IntSettingName): number | undefined {
  const { default: fallback, min, max } = INT_SETTINGS[name];
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** A whole-number variable that has a default, so it always reads as a number. */
function int(env: Env, name: Exclude<IntSettingName, 'BATON_METRICS_PORT'>): number {
  return optionalInt(env, name) as number;
}

function url(env: Env, name: string, protocols: readonly string[]): string | undefined {
  const v = optional(env, name);
  if (v === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new ConfigError(`${name} is not a URL`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  }
  return v;
}

/** REDIS_URL: one server (`redis://`, `rediss://`) or a cluster's seed nodes (`redis+cluster://h:p,h:p`). */
function redisUrl(env: Env): string | undefined {
  const v = optional(env, 'REDIS_URL');
  if (v === undefined) return undefined;
  try {
    parseRedisTarget(v);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  return v;
}

function pools(env: Env): string[] {
  const raw = optional(env, 'BATON_WORKER_POOLS');
  if (raw === undefined) return [''];
  const names = raw.split(',').map((p) => p.trim().toLowerCase());
  const out: string[] = [];
  for (const name of names) {
    // "default" (or an empty item) names the unnamed pool.
    const pool = name === '' || name === 'default' ? '' : name;
    if (pool !== '' && !new RegExp(POOL_PATTERN).test(pool)) {
      throw new ConfigError(
        `BATON_WORKER_POOLS: ${JSON.stringify(name)} is not a pool name (lower-case letters, digits, "_" and "-", at most 32)`,
      );
    }
    if (!out.includes(pool)) out.push(pool);
  }
  return out;
}

const DEADLINE_KEYS = ['writeMs', 'observeMs', 'busyMs'] as const;

function adapterDeadlines(env: Env): Record<string, Partial<Record<(typeof DEADLINE_KEYS)[number], number>>> {
  const raw = optional(env, 'BATON_ADAPTER_DEADLINES');
  if (raw === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError('BATON_ADAPTER_DEADLINES must be JSON, e.g. {"webhook":{"writeMs":5000}}');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new ConfigError('BATON_ADAPTER_DEADLINES must be a JSON object of provider -> deadlines');
  const out: Record<string, Partial<Record<(typeof DEADLINE_KEYS)[number], number>>> = {};
  for (const [provider, value] of Object.entries(parsed)) {
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      throw new ConfigError(`BATON_ADAPTER_DEADLINES.${provider} must be an object`);
    const d: Partial<Record<(typeof DEADLINE_KEYS)[number], number>> = {};
    for (const [key, ms] of Object.entries(value as Record<string, unknown>)) {
      if (!(DEADLINE_KEYS as readonly string[]).includes(key))
        throw new ConfigError(`BATON_ADAPTER_DEADLINES.${provider}.${key} is unknown; use ${DEADLINE_KEYS.join(', ')}`);
      if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 1 || ms > 3_600_000)
        throw new ConfigError(`BATON_ADAPTER_DEADLINES.${provider}.${key} must be a whole number of ms between 1 and 3600000`);
      d[key as (typeof DEADLINE_KEYS)[number]] = ms;
    }
    out[provider] = Object.freeze(d);
  }
  return Object.freeze(out);
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export function loadConfig(env: Env = process.env): BatonConfig {
  const host = str(env, 'BATON_API_HOST', '127.0.0.1');
  const port = int(env, 'BATON_API_PORT');
  const logLevel = str(env, 'BATON_LOG_LEVEL', 'info');
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError(`BATON_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const redisPrefix = str(env, 'BATON_REDIS_PREFIX', 'baton');
  if (!/^[A-Za-z0-9_.-]{1,40}$/.test(redisPrefix)) {
    throw new ConfigError('BATON_REDIS_PREFIX may hold only letters, digits, ".", "_" and "-" (no ":")');
  }
  const providers = str(env, 'BATON_WORKER_PROVIDERS', 'demo')
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  const defaultProject = str(env, 'BATON_PROJECT', 'default').toLowerCase();
  const home = str(env, 'BATON_HOME', join(env['HOME'] || homedir(), '.baton'));
  const publicUrl = (url(env, 'BATON_URL', ['http:', 'https:']) ?? `http://${host.includes(':') ? `[${host}]` : host}:${port}`).replace(
    /\/+$/,
    '',
  );
  const turnLockTtlMs = int(env, 'BATON_TURN_LOCK_TTL_MS');
  const subscriptionAddresses = str(env, 'BATON_SUBSCRIPTION_ADDRESSES', 'no-private') as SubscriptionAddressPolicy;
  if (!SUBSCRIPTION_ADDRESS_POLICIES.includes(subscriptionAddresses))
    throw new ConfigError(`BATON_SUBSCRIPTION_ADDRESSES must be one of ${SUBSCRIPTION_ADDRESS_POLICIES.join(', ')}`);
  const allowedHosts = allowedHostsOf(env, host, publicUrl);
  const config: BatonConfig = {
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    redisUrl: redisUrl(env),
    api: {
      host,
      port,
      publicUrl,
      allowedHosts,
      trustProxy: trustProxyOf(env),
    },
    logLevel: logLevel as BatonConfig['logLevel'],
    redisPrefix,
    queueShards: int(env, 'BATON_QUEUE_SHARDS'),
    workerProviders: providers,
    workerPools: pools(env),
    adapterDeadlines: adapterDeadlines(env),
    command: Object.freeze({
      runDir: str(env, 'BATON_COMMAND_RUN_DIR', join(home, 'command-runs')),
      baseEnv: Object.freeze(pickEnv(env, PROGRAM_ENV_NAMES, true)),
    }),
    codex: Object.freeze({ baseEnv: Object.freeze(pickEnv(env, CODEX_ENV_NAMES)) }),
    claudeCode: Object.freeze({
      runDir: str(env, 'BATON_CLAUDE_CODE_RUN_DIR', join(home, 'claude-code-runs')),
      baseEnv: Object.freeze(pickEnv(env, PROGRAM_ENV_NAMES, true)),
    }),
    webhookCallbackUrl: url(env, 'BATON_WEBHOOK_CALLBACK_URL', ['http:', 'https:']) ?? `${publicUrl}/v1/webhooks/callback`,
    subscriptionAddresses,
    workerConcurrency: int(env, 'BATON_WORKER_CONCURRENCY'),
    turnLockTtlMs,
    jobLockMs: int(env, 'BATON_JOB_LOCK_MS'),
    stalledIntervalMs: int(env, 'BATON_STALLED_INTERVAL_MS'),
    reconcileIntervalMs: int(env, 'BATON_RECONCILE_INTERVAL_MS'),
    shutdownGraceMs: int(env, 'BATON_SHUTDOWN_GRACE_MS'),
    startTimeoutMs: int(env, 'BATON_START_TIMEOUT_MS'),
    heapGrowthPercent: int(env, 'BATON_HEAP_GROWTH_PERCENT'),
    dbPoolSize: int(env, 'BATON_DB_POOL_SIZE'),
    dbTimeouts: Object.freeze({
      queryMs: int(env, 'BATON_DB_QUERY_TIMEOUT_MS'),
      connectMs: int(env, 'BATON_DB_CONNECT_TIMEOUT_MS'),
    }),
    deliveryWindows: Object.freeze({
      unobservableAfterMs: int(env, 'BATON_UNOBSERVABLE_AFTER_MS'),
      interruptResendDelayMs: int(env, 'BATON_INTERRUPTED_RESEND_AFTER_MS'),
      errorResendDelayMs: int(env, 'BATON_ERROR_RESEND_AFTER_MS'),
      absenceScans: int(env, 'BATON_UNCERTAIN_SCANS'),
      absenceWindowMs: int(env, 'BATON_UNCERTAIN_SCAN_WINDOW_MS'),
      unreachableGiveUpMs: int(env, 'BATON_UNREACHABLE_GIVE_UP_MS'),
      roleRerouteAfterMs: int(env, 'BATON_ROLE_REROUTE_AFTER_MS'),
    }),
    demoHostUrl: url(env, 'BATON_DEMO_HOST_URL', ['http:']),
    defaultProject,
    agent: optional(env, 'BATON_AGENT'),
    home,
    token: optional(env, 'BATON_TOKEN'),
    adminToken: optional(env, 'BATON_ADMIN_TOKEN'),
    clientTimeoutMs: int(env, 'BATON_CLIENT_TIMEOUT_MS'),
    profilePath: str(env, 'BATON_PROFILE', join(home, 'profile.json')),
    rateLimit: {
      perSecond: int(env, 'BATON_RATE_LIMIT_PER_SEC'),
      burst: int(env, 'BATON_RATE_LIMIT_BURST'),
    },
    metricsPort: optionalInt(env, 'BATON_METRICS_PORT'),
    setVariables: Object.freeze(
      Object.keys(env).filter(
        (k) => (k.startsWith('BATON_') || k === 'DATABASE_URL' || k === 'REDIS_URL') && env[k] !== undefined && env[k] !== '',
      ),
    ),
  };
  return Object.freeze(config);
}
