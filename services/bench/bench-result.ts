/*
 * What a bench run reports (the `--json` output): report.ts renders it, targets.ts evaluates its
 * targets and guarantees, run-bench.ts fills it.
 */
import type { BusyAgentsResult } from './scenarios/busy-agents.ts';
import type { CapacityResult } from './scenarios/capacity.ts';
import type { Ceilings } from './scenarios/ceilings.ts';
import type { DeliveryRun } from './scenarios/delivery.ts';
import type { DispatchLatencyResult } from './scenarios/dispatch-latency.ts';
import type { LongTurnsResult } from './scenarios/long-turns.ts';
import type { RecoveryResult } from './scenarios/recovery.ts';
import type { SendResults } from './scenarios/send.ts';
import type { RoleRoutingResult } from './scenarios/role-routing.ts';
import type { StartupResult } from './scenarios/startup.ts';

export interface BenchResult {
  version: 1;
  mode: 'quick' | 'full';
  startedAt: string;
  seconds: number;
  machine: { cpus: number; node: string; postgres: string; redis: string; embeddedPostgres: boolean; embeddedRedis: boolean };
  /** The scenarios run when `--only` chose some; the others' fields are absent. */
  only?: string[];
  ceilings?: Ceilings;
  send?: SendResults;
  delivery?: DeliveryRun[];
  dispatchLatency?: DispatchLatencyResult;
  busyAgents?: BusyAgentsResult;
  recovery?: RecoveryResult;
  longTurns?: LongTurnsResult;
  /** Issue 34: handoffs to a role against the same spread round-robin at send time. */
  roleRouting?: RoleRoutingResult;
  /** Time to ready of fresh API and worker processes. */
  startup?: StartupResult;
  /** The capacity model held against 1, 2, 4 (`--workers`) worker processes on this host. */
  capacity?: CapacityResult;
  /** Issue 16's targets (services/bench/targets.ts), each met, NO or n/a (met null). */
  targets: Target[];
  /** Guarantees checked beside the targets: ordering, exactly-once, recovery. */
  guarantees: Guarantee[];
}

/** One row of the target table as printed and as emitted in `--json`. */
export interface Target {
  /** Stable key of the target (TARGETS[].id). */
  id: string;
  /** What was measured, naming the scale actually measured when it is not the issue's. */
  name: string;
  goal: string;
  /** The reading as printed; "n/a" when this run cannot measure it. */
  measured: string;
  /** The reading compared with the goal; null when unavailable. */
  value: number | null;
  /** null: not measurable in this run (a shared Postgres or Redis, a scenario size without that run); printed n/a. */
  met: boolean | null;
}

/** A guarantee the bench checks beside the targets (ordering, recovery): always measured when its scenario ran. */
export interface Guarantee {
  name: string;
  goal: string;
  measured: string;
  met: boolean;
}
