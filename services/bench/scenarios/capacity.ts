import os from 'node:os';
import { predictOnHost, withinBand, type HandoffCosts, type HostPrediction } from '../capacity-model.ts';
import type { BenchEnvironment } from '../bench-environment.ts';
import { round } from '../measure.ts';
import type { DeliverySeries } from '../plot-data.ts';
import { commandStats, type UsagePerHandoff } from '../usage.ts';
import { measureDelivery } from './delivery.ts';

export interface CapacityOptions {
  /** Worker process counts, one e2e run each; the first calibrates the model (`--workers`). */
  workers: readonly number[];
  agents: number;
  handoffs: number;
  warmUp: number;
}

/** What a capacity run measured on the host, beside what the model predicted for it. */
export interface CapacityRun {
  workers: number;
  agents: number;
  handoffs: number;
  /** End to end to RETURNED (first commit to last RETURNED). */
  returnedPerSec: number;
  perHandoff: UsagePerHandoff;
  /** Postgres at the measured rate: cores busy, statements/s, WAL bytes/s (null: not measurable here). */
  postgres: { cores: number | null; statementsPerSec: number | null; walBytesPerSec: number | null };
  redis: { commandsPerSec: number | null; cores: number | null };
  /** Cores other work on the host kept busy during the run (a shared machine); null: unreadable. */
  otherCores: number | null;
  /**
   * The model's prediction for this run, from the calibration run's costs and this run's free
   * cores; null: a shared Postgres or Redis, whose CPU is not known.
   */
  prediction: HostPrediction | null;
  /** Measured throughput and Postgres load (cores) inside the predicted bands. null: Postgres not measurable. */
  withinBand: { throughput: boolean | null; postgres: boolean | null };
  series?: DeliverySeries;
}

export interface CapacityResult {
  cores: number;
  /** The run whose per-handoff costs every prediction uses (costs null: a shared Postgres or Redis). */
  calibration: { workers: number; costs: HandoffCosts | null };
  runs: CapacityRun[];
  /** Redis CPU per command in the calibration run, ms (null: a shared Redis). */
  redisMsPerCommand: number | null;
  /** Redis memory an agent keeps once it has had a turn (its fence counter, MEMORY USAGE), bytes; null: none found. */
  redisBytesPerAgent: number | null;
  /** Redis commands per handoff by name in the calibration run (INFO commandstats, scripts' inner commands included). */
  redisCommandsPerHandoff: Record<string, number> | null;
}

/** The costs the model reads, from a run's usage; null when a CPU figure is unavailable (a shared server). */
export function handoffCosts(u: UsagePerHandoff): HandoffCosts | null {
  const c = u.cpuMs;
  if (c.api === null || c.workers === null || c.postgres === null || c.redis === null || c.demoHost === null || c.loadGenerator === null)
    return null;
  return {
    cpuMs: { api: c.api, workers: c.workers, postgres: c.postgres, redis: c.redis, demoHost: c.demoHost, loadGenerator: c.loadGenerator },
    postgresStatements: u.postgresStatements,
    postgresWalBytes: u.postgresWalBytes ?? null,
    redisCommands: u.redisCommands,
  };
}

const rate = (perHandoff: number | null | undefined, perSec: number, digits = 2) =>
  perHandoff === null || perHandoff === undefined ? null : round(perHandoff * perSec, digits);

/**
 * The capacity model held against this host: one e2e run per worker count (fresh API and N
 * workers, `agents` zero-think agents, a warm-up measured apart), each measuring throughput,
 * Postgres load and every process's CPU per handoff. The first run's costs calibrate
 * `predictOnHost`, which then predicts every run (the first too) from the cores the host had
 * free during it; a run is within the model when its throughput and Postgres cores fall inside
 * the predicted bands.
 */
export async function measureCapacity(
  env: BenchEnvironment,
  opts: CapacityOptions,
  tick: (label: string) => void,
): Promise<CapacityResult> {
  const cores = os.cpus().length;
  const measured: Array<{ workers: number; returnedPerSec: number; perHandoff: UsagePerHandoff; series?: DeliverySeries }> = [];
  let redisBytesPerAgent: number | null = null;
  let commandsBefore: Map<string, number> | null = null;
  let commandsPerHandoff: Record<string, number> | null = null;
  for (const [i, workers] of opts.workers.entries()) {
    const first = i === 0;
    if (first && env.embedded.redis) commandsBefore = await commandStats(env);
    const run = await measureDelivery(env, opts.agents, opts.handoffs, true, opts.warmUp, () => undefined, {
      project: `cap${workers}w`,
      tuning: { workers },
      beforeRelease: first
        ? async () => {
            redisBytesPerAgent = await fenceBytes(env);
            if (commandsBefore) commandsPerHandoff = await commandsPer(env, commandsBefore, opts.warmUp + opts.handoffs);
          }
        : undefined,
    });
    measured.push({
      workers,
      returnedPerSec: run.returnedPerSec,
      perHandoff: run.perHandoff,
      ...(run.series ? { series: run.series } : {}),
    });
    tick(`capacity: ${workers} worker${workers === 1 ? '' : 's'}`);
  }
  const calibration = measured[0];
  const costs = calibration ? handoffCosts(calibration.perHandoff) : null;
  if (!calibration) throw new Error('the capacity scenario needs at least one worker count');
  const runs = measured.map((m): CapacityRun => {
    const u = m.perHandoff;
    const seconds = u.windowSeconds ?? 0;
    const total = opts.handoffs;
    const otherCores =
      u.otherProcessesCpuMs === null || u.otherProcessesCpuMs === undefined || seconds <= 0
        ? null
        : round((u.otherProcessesCpuMs * total) / seconds / 1000, 2);
    // Without every process's CPU (a configured Postgres or Redis) there is nothing to predict from.
    const prediction = costs ? predictOnHost(costs, { cores, otherCores: otherCores ?? 0, workers: m.workers, apiProcesses: 1 }) : null;
    const pgCores = rate(u.cpuMs.postgres === null ? null : u.cpuMs.postgres / 1000, m.returnedPerSec, 3);
    return {
      workers: m.workers,
      agents: opts.agents,
      handoffs: total,
      returnedPerSec: m.returnedPerSec,
      perHandoff: u,
      postgres: {
        cores: pgCores,
        statementsPerSec: rate(u.postgresStatements, m.returnedPerSec, 0),
        walBytesPerSec: rate(u.postgresWalBytes, m.returnedPerSec, 0),
      },
      redis: {
        commandsPerSec: rate(u.redisCommands, m.returnedPerSec, 0),
        cores: rate(u.cpuMs.redis === null ? null : u.cpuMs.redis / 1000, m.returnedPerSec, 3),
      },
      otherCores,
      prediction,
      withinBand: {
        throughput: prediction ? withinBand(m.returnedPerSec, prediction.handoffsPerSec) : null,
        postgres: pgCores === null || !prediction ? null : withinBand(pgCores, prediction.postgres.cores),
      },
      ...(m.series ? { series: m.series } : {}),
    };
  });
  const c = calibration.perHandoff;
  return {
    cores,
    calibration: { workers: calibration.workers, costs },
    runs,
    redisMsPerCommand: c.cpuMs.redis !== null && c.redisCommands ? round(c.cpuMs.redis / c.redisCommands, 5) : null,
    redisBytesPerAgent,
    redisCommandsPerHandoff: commandsPerHandoff,
  };
}

/** Mean MEMORY USAGE of up to 200 of the run's turn-fence keys (one per agent that had a turn), bytes. */
async function fenceBytes(env: BenchEnvironment): Promise<number | null> {
  const keys = (await env.scanKeys(`${env.prefix}:turn-fence:*`)).slice(0, 200);
  if (keys.length === 0) return null;
  const sizes = await Promise.all(keys.map(async (k) => Number((await env.redis.memory('USAGE', k).catch(() => 0)) ?? 0)));
  return round(sizes.reduce((a, b) => a + b, 0) / sizes.length, 0);
}

/** Redis commands by name since `before`, per handoff (the warm-up's included: the whole run's mix). */
async function commandsPer(env: BenchEnvironment, before: Map<string, number>, handoffs: number): Promise<Record<string, number>> {
  const after = await commandStats(env);
  return Object.fromEntries(
    [...after]
      .map(([name, n]) => [name, round((n - (before.get(name) ?? 0)) / handoffs, 3)] as const)
      .filter(([, n]) => n > 0)
      .sort((a, b) => b[1] - a[1]),
  );
}
