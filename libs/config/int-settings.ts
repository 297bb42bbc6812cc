import { DEFAULT_DATABASE_TIMEOUTS } from '../domain/database-timeouts.ts';
import { DEFAULT_DELIVERY_WINDOWS } from '../domain/delivery-policy.ts';

/**
 * A whole-number variable: its default when unset (undefined: the setting is off) and the
 * range it accepts, both ends included. `loadConfig` reads every one through this table, and
 * test/unit/config-tables.test.ts holds the README tables' defaults and ranges against it.
 */
export interface IntSetting {
  readonly default: number | undefined;
  readonly min: number;
  readonly max: number;
}

const HOUR_MS = 3_600_000;
const WEEK_MS = 7 * 24 * HOUR_MS;

/** BATON_HEAP_GROWTH_PERCENT's default (docs/PERFORMANCE.md, "Memory"). */
export const DEFAULT_HEAP_GROWTH_PERCENT = 30;

/** Every whole-number variable `loadConfig` reads, with its one default and its bounds. */
export const INT_SETTINGS = Object.freeze({
  BATON_API_PORT: { default: 8787, min: 0, max: 65535 },
  BATON_QUEUE_SHARDS: { default: 4, min: 1, max: 256 },
  BATON_WORKER_CONCURRENCY: { default: 64, min: 1, max: 10_000 },
  BATON_TURN_LOCK_TTL_MS: { default: 3_000, min: 300, max: 600_000 },
  BATON_JOB_LOCK_MS: { default: 3_000, min: 500, max: 600_000 },
  BATON_STALLED_INTERVAL_MS: { default: 1_000, min: 200, max: 600_000 },
  BATON_RECONCILE_INTERVAL_MS: { default: 1_000, min: 50, max: HOUR_MS },
  BATON_SHUTDOWN_GRACE_MS: { default: 15_000, min: 0, max: HOUR_MS },
  BATON_START_TIMEOUT_MS: { default: 10_000, min: 100, max: HOUR_MS },
  BATON_HEAP_GROWTH_PERCENT: { default: DEFAULT_HEAP_GROWTH_PERCENT, min: 0, max: 300 },
  BATON_DB_POOL_SIZE: { default: 10, min: 1, max: 500 },
  BATON_DB_QUERY_TIMEOUT_MS: { default: DEFAULT_DATABASE_TIMEOUTS.queryMs, min: 100, max: 600_000 },
  BATON_DB_CONNECT_TIMEOUT_MS: { default: DEFAULT_DATABASE_TIMEOUTS.connectMs, min: 100, max: 600_000 },
  BATON_UNOBSERVABLE_AFTER_MS: { default: DEFAULT_DELIVERY_WINDOWS.unobservableAfterMs, min: 100, max: WEEK_MS },
  BATON_INTERRUPTED_RESEND_AFTER_MS: { default: DEFAULT_DELIVERY_WINDOWS.interruptResendDelayMs, min: 0, max: WEEK_MS },
  BATON_ERROR_RESEND_AFTER_MS: { default: DEFAULT_DELIVERY_WINDOWS.errorResendDelayMs, min: 0, max: 24 * HOUR_MS },
  BATON_UNCERTAIN_SCANS: { default: DEFAULT_DELIVERY_WINDOWS.absenceScans, min: 2, max: 100 },
  BATON_UNCERTAIN_SCAN_WINDOW_MS: { default: DEFAULT_DELIVERY_WINDOWS.absenceWindowMs, min: 100, max: 30 * 24 * HOUR_MS },
  BATON_UNREACHABLE_GIVE_UP_MS: { default: DEFAULT_DELIVERY_WINDOWS.unreachableGiveUpMs, min: 0, max: WEEK_MS },
  BATON_ROLE_REROUTE_AFTER_MS: { default: DEFAULT_DELIVERY_WINDOWS.roleRerouteAfterMs, min: 100, max: WEEK_MS },
  BATON_CLIENT_TIMEOUT_MS: { default: 30_000, min: 100, max: HOUR_MS },
  BATON_RATE_LIMIT_PER_SEC: { default: 100, min: 0, max: 1_000_000 },
  BATON_RATE_LIMIT_BURST: { default: 200, min: 1, max: 10_000_000 },
  BATON_METRICS_PORT: { default: undefined, min: 1, max: 65535 },
} satisfies Record<string, IntSetting>);

export type IntSettingName = keyof typeof INT_SETTINGS;
