import type { BatonConfig } from '../../libs/config/load-config.ts';
import type { Clock } from '../../libs/domain/clock.ts';
import type { Database } from '../../libs/db/open-database.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import type { BatonMetrics } from '../../libs/metrics/baton-metrics.ts';
import type { RedisClient } from '../../libs/queue/open-redis.ts';

/**
 * What the `baton` command starts that lives in another service: the API server (services/api),
 * the benchmark (services/bench) and the chaos run (services/chaos). services/cli imports no
 * other service; the entry point (main/launchers.ts) hands these in, and each loads its service
 * with a dynamic import() only when called, so `baton --help` and the client commands load none.
 * The types say only what the commands use of each.
 */
export interface Launchers {
  readonly startApi: ApiLauncher;
  readonly bench: BenchLauncher;
  readonly chaos: ChaosLauncher;
}

/** What the API server is started on: the stack's connections, its clock and metrics, and the loaded config (BATON_API_*, ...). */
export interface ApiParts {
  readonly config: BatonConfig;
  readonly db: Database;
  /** A producer connection (fails fast when Redis is down). */
  readonly redis: RedisClient;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The process's registry: in `serve` the API's /metrics also shows the worker's reconciler. */
  readonly metrics: BatonMetrics;
}

export interface StartedApi {
  readonly url: string;
  /** Stops accepting requests, lets in-flight ones finish, closes its queues. */
  close(): Promise<void>;
}

/** Builds the API and listens (`serve`, `api`, `demo`); a failed listen rejects with the listen error. */
export type ApiLauncher = (parts: ApiParts) => Promise<StartedApi>;

export interface BenchRequest {
  readonly quick: boolean;
  readonly json: boolean;
  /** Show the progress bar (stderr). */
  readonly progress: boolean;
  readonly tty: boolean;
  /** `--only`, as given: comma-separated scenario names. */
  readonly only?: string | undefined;
  /** `--workers`, as given: comma-separated worker process counts for the capacity runs. */
  readonly workers?: string | undefined;
  /** `--html`: also render the self-contained HTML page (returned as `html`). */
  readonly html?: boolean | undefined;
}

/**
 * `baton bench`: runs the benchmark and renders its report (and, with `html`, the HTML page).
 * An unknown name in `only`, or a malformed `workers`, rejects with a UsageError before
 * anything starts.
 */
export type BenchLauncher = (
  config: BatonConfig,
  request: BenchRequest,
  write: (s: string) => void,
) => Promise<{ readonly result: unknown; readonly report: string; readonly html?: string }>;

export interface ChaosRequest {
  /** `--short`: the sizes the test suite uses, where `sizes` sets none. */
  readonly short: boolean;
  /** The sizes given on the command line (a missing one takes the default of the run's length). */
  readonly sizes: {
    readonly agents?: number;
    readonly manualAgents?: number;
    readonly handoffs?: number;
    readonly durationSec?: number;
    readonly deadlineSec?: number;
  };
  readonly seed: number;
  readonly keepLogs: boolean;
  /** Busy processes per CPU beside Baton (0: none). */
  readonly starved: number;
}

/**
 * `baton chaos`: the run and its rendered report; `ok` is false when an invariant broke. Rejects
 * when interrupted through `signal` (after cleaning up).
 */
export type ChaosLauncher = (
  request: ChaosRequest,
  log: (line: string) => void,
  signal: AbortSignal,
) => Promise<{ readonly ok: boolean; readonly result: unknown; readonly report: string }>;

const missing = (what: string) => () =>
  Promise.reject(
    new Error(`this program was built without the ${what} launcher (the \`baton\` entry point, main/launchers.ts, hands it in)`),
  );

/** For a program built without the entry point (tests of the client commands): every launcher rejects. */
export const NO_LAUNCHERS: Launchers = { startApi: missing('API'), bench: missing('bench'), chaos: missing('chaos') };
