import { describe, expect, it } from 'vitest';
import {
  BAND,
  HOST_UTILIZATION,
  busiestPrimaryShare,
  fleetCapacity,
  offMid,
  predictOnHost,
  withinBand,
  type FleetCosts,
  type FleetSpec,
  type HandoffCosts,
} from '../../services/bench/capacity-model.ts';
import { parseWorkerCounts } from '../../services/bench/bench-scenarios.ts';
import { evaluateTargets, type Measurements } from '../../services/bench/targets.ts';

/** 2 ms of CPU per handoff over every process; the workers 0.8 of it (all of them together). */
const costs: HandoffCosts = {
  cpuMs: { api: 0.3, workers: 0.8, postgres: 0.5, redis: 0.1, demoHost: 0.1, loadGenerator: 0.2 },
  postgresStatements: 0.4,
  postgresWalBytes: 3000,
  redisCommands: 9,
};

describe('predictOnHost: one host, N worker processes sharing its cores', () => {
  it('is limited by the host’s cores at HOST_UTILIZATION when every process fits', () => {
    const p = predictOnHost(costs, { cores: 2, otherCores: 0, workers: 2, apiProcesses: 1 });
    expect(p.limitedBy).toBe('host cores');
    expect(p.handoffsPerSec.mid).toBeCloseTo((2 * HOST_UTILIZATION * 1000) / 2, 6);
    expect(p.handoffsPerSec.low).toBeCloseTo(p.handoffsPerSec.mid * (1 - BAND), 6);
    expect(p.handoffsPerSec.high).toBeCloseTo(p.handoffsPerSec.mid * (1 + BAND), 6);
  });

  it('is limited by one worker’s thread when its share of the CPU exceeds one core', () => {
    const heavy = { ...costs, cpuMs: { ...costs.cpuMs, workers: 1.8 } };
    const p = predictOnHost(heavy, { cores: 2, otherCores: 0, workers: 1, apiProcesses: 1 });
    expect(p.limitedBy).toBe('worker processes');
    expect(p.handoffsPerSec.mid).toBeCloseTo(1000 / 1.8, 6);
  });

  it('adds no capacity for workers past the cores: 4 workers on 2 cores predict what 2 do', () => {
    const heavy = { ...costs, cpuMs: { ...costs.cpuMs, workers: 3 } };
    const two = predictOnHost(heavy, { cores: 2, otherCores: 0, workers: 2, apiProcesses: 1 });
    const four = predictOnHost(heavy, { cores: 2, otherCores: 0, workers: 4, apiProcesses: 1 });
    expect(four.handoffsPerSec.mid).toBe(two.handoffsPerSec.mid);
    // On 8 cores the fourth worker does count.
    const big = predictOnHost(heavy, { cores: 8, otherCores: 0, workers: 4, apiProcesses: 1 });
    expect(big.handoffsPerSec.mid).toBeGreaterThan(four.handoffsPerSec.mid);
  });

  it('takes the cores other work kept busy off the host', () => {
    const quiet = predictOnHost(costs, { cores: 2, otherCores: 0, workers: 2, apiProcesses: 1 });
    const shared = predictOnHost(costs, { cores: 2, otherCores: 1, workers: 2, apiProcesses: 1 });
    expect(shared.handoffsPerSec.mid).toBeCloseTo(quiet.handoffsPerSec.mid / 2, 6);
  });

  it('predicts Postgres and Redis load at the predicted rate from the per-handoff costs', () => {
    const p = predictOnHost(costs, { cores: 2, otherCores: 0, workers: 2, apiProcesses: 1 });
    expect(p.postgres.cores.mid).toBeCloseTo((p.handoffsPerSec.mid * 0.5) / 1000, 6);
    expect(p.postgres.statementsPerSec!.mid).toBeCloseTo(p.handoffsPerSec.mid * 0.4, 6);
    expect(p.postgres.walBytesPerSec!.high).toBeCloseTo(p.handoffsPerSec.high * 3000, 6);
    expect(p.redis.commandsPerSec!.low).toBeCloseTo(p.handoffsPerSec.low * 9, 6);
    const unmeasured = predictOnHost(
      { ...costs, postgresStatements: null, postgresWalBytes: null, redisCommands: null },
      {
        cores: 2,
        otherCores: 0,
        workers: 2,
        apiProcesses: 1,
      },
    );
    expect(unmeasured.postgres.statementsPerSec).toBeNull();
    expect(unmeasured.redis.commandsPerSec).toBeNull();
  });

  it('tells in and out of a band, bounds included, and how far off its middle', () => {
    const b = { low: 75, mid: 100, high: 125 };
    expect([withinBand(75, b), withinBand(125, b), withinBand(74.9, b), withinBand(125.1, b)]).toEqual([true, true, false, false]);
    expect(offMid(80, b)).toBeCloseTo(0.2, 9);
    expect(offMid(130, b)).toBeCloseTo(0.3, 9);
  });
});

const fleetCosts: FleetCosts = {
  handoff: {
    cpuMs: { api: 0.25, workers: 0.6, postgres: 1, redis: 0.1, demoHost: 0, loadGenerator: 0 },
    postgresStatements: 0.4,
    postgresWalBytes: 5000,
    redisCommands: 10,
  },
  redisMsPerCommand: 0.015,
  postgresMsPerTurnStatement: 0.05,
  redisBytesPerAgent: 100,
  redisBytesPerQueuedHandoff: 1000,
  liveTurn: { redisCommandsPerSec: 3.7, postgresStatementsPerSec: 0.5, workerCpuMsPerSec: 0.3, workerRssKiB: 55 },
};

const spec: FleetSpec = {
  postgres: { vcpus: 8, utilization: 0.7, connections: 400, walBytesPerSec: 100 * 1024 * 1024 },
  redis: { primaries: 1, utilization: 0.7, memoryBytes: 1024 ** 3 },
  deliveryQueues: 4,
  dbPoolSize: 10,
  processUtilization: 0.7,
  turnSlotsPerWorker: 256,
  workerMemoryForTurnsBytes: 64 * 1024 ** 2,
};

describe('fleetCapacity: one Postgres primary and a Redis cluster', () => {
  it('finds Postgres CPU first for an 8-vCPU primary and names every bound', () => {
    const f = fleetCapacity(fleetCosts, spec);
    expect(f.handoffsPerSec.limitedBy).toBe('Postgres CPU');
    expect(f.handoffsPerSec.value).toBeCloseTo(8 * 0.7 * 1000, 6);
    const bound = (l: string) => f.handoffsPerSec.bounds.find((b) => b.limit === l)!.handoffsPerSec;
    expect(bound('Postgres WAL')).toBeCloseTo((100 * 1024 * 1024) / 5000, 6);
    expect(bound('Redis CPU (busiest primary)')).toBeCloseTo(700 / 0.1, 6);
    // 40 processes of 10 connections, each 0.7 of a core, 0.85 ms per handoff.
    expect(bound('Postgres connections')).toBeCloseTo((40 * 700) / 0.85, 6);
    expect(f.processesAtLimit).toEqual({ api: Math.ceil((5600 * 0.25) / 700), workers: Math.ceil((5600 * 0.6) / 700) });
  });

  it('moves the limit to the busiest Redis primary when Postgres grows, and spreads it with more primaries', () => {
    const big = { ...spec, postgres: { ...spec.postgres, vcpus: 64, connections: 5000 } };
    const one = fleetCapacity(fleetCosts, big);
    expect(one.handoffsPerSec.limitedBy).toBe('Redis CPU (busiest primary)');
    const three = fleetCapacity(fleetCosts, { ...big, redis: { ...big.redis, primaries: 3 } });
    expect(three.redisBusiestShare).toBeLessThan(0.5);
    expect(three.handoffsPerSec.value).toBeGreaterThan(one.handoffsPerSec.value * 2);
  });

  it('weighs the busiest primary: all of the work on one, the queue keys at most as spread as the queues', () => {
    expect(busiestPrimaryShare(1, 4)).toBeCloseTo(1, 9);
    // 8 primaries, 4 queues: a queue's keys are on at most 4 of them.
    expect(busiestPrimaryShare(8, 4)).toBeCloseTo(0.89 / 8 + 0.095 / 4 + 0.015, 9);
    expect(busiestPrimaryShare(8, 4)).toBeGreaterThan(busiestPrimaryShare(8, 64));
  });

  it('bounds live turns and agents by what each costs', () => {
    const f = fleetCapacity(fleetCosts, spec);
    const turnBound = (l: string) => f.liveTurns.bounds.find((b) => b.limit.startsWith(l))!.turns;
    expect(turnBound('Postgres CPU')).toBe(Math.floor(5600 / (0.5 * 0.05)));
    expect(turnBound('Redis CPU')).toBe(Math.floor(700 / (3.7 * 0.015)));
    expect(turnBound('worker slots')).toBe(256 * 40);
    expect(f.liveTurns.value).toBe(Math.min(...f.liveTurns.bounds.map((b) => b.turns)));
    expect(f.agents).toBe(Math.floor((1024 ** 3 * 0.5) / 100));
    expect(f.queuedHandoffs).toBe(Math.floor((1024 ** 3 * 0.5) / 1000));
  });
});

describe('--workers', () => {
  it('takes comma-separated worker counts from 1 to 64, in order', () => {
    expect(parseWorkerCounts('1,2,4')).toEqual([1, 2, 4]);
    expect(parseWorkerCounts(' 3 ')).toEqual([3]);
  });

  it('refuses what is not a count, out of range or repeated', () => {
    for (const bad of ['0', '65', '1,,2', 'two', '1.5', '-1']) expect(() => parseWorkerCounts(bad), bad).toThrow(/--workers takes/);
    expect(() => parseWorkerCounts('2,2')).toThrow(/twice/);
  });
});

describe('the capacity target rows (issue 36, one per worker count measured)', () => {
  const p = predictOnHost(costs, { cores: 2, otherCores: 0, workers: 1, apiProcesses: 1 });
  const capacityRun = (workers: number, returnedPerSec: number, pgCores: number | null) => ({
    workers,
    agents: 100,
    handoffs: 500,
    returnedPerSec,
    perHandoff: { cpuMs: { ...costs.cpuMs, total: 2 }, postgresStatements: 0.4, redisCommands: 9 },
    postgres: { cores: pgCores, statementsPerSec: null, walBytesPerSec: null },
    redis: { commandsPerSec: null, cores: null },
    otherCores: 0,
    prediction: p,
    withinBand: { throughput: true, postgres: true },
  });
  const m = (runs: ReturnType<typeof capacityRun>[]): Measurements => ({
    version: 1,
    mode: 'full',
    startedAt: '2026-12-08T00:00:00.000Z',
    seconds: 1,
    machine: { cpus: 2, node: '20', postgres: '18', redis: '7', embeddedPostgres: true, embeddedRedis: true },
    capacity: {
      cores: 2,
      calibration: { workers: 1, costs },
      runs,
      redisMsPerCommand: null,
      redisBytesPerAgent: null,
      redisCommandsPerHandoff: null,
    },
  });

  it('is met when the farther of throughput and Postgres cores lies within 25% of the prediction, else NO or n/a', () => {
    const mid = p.handoffsPerSec.mid;
    const pg = p.postgres.cores.mid;
    const rows = evaluateTargets(
      m([capacityRun(1, Math.round(mid * 1.2), pg), capacityRun(2, Math.round(mid), pg * 1.3), capacityRun(4, Math.round(mid), null)]),
      [],
    );
    expect(rows.map((r) => [r.id, r.met])).toEqual([
      ['capacity-band-1-workers', true],
      ['capacity-band-2-workers', false],
      ['capacity-band-4-workers', null],
    ]);
    expect(rows[1]!.name).toBe('Capacity model: throughput and Postgres load within the predicted band (2 workers)');
    expect(rows[1]!.measured).toMatch(/^30% \(\d+\/s in \d+-\d+\/s, Postgres [\d.]+ cores in [\d.]+-[\d.]+\)$/);
    expect(evaluateTargets(m([]), [])).toEqual([]);
    // A shared Postgres or Redis: no prediction, so n/a rather than a verdict.
    const shared = evaluateTargets(m([{ ...capacityRun(2, Math.round(mid), pg), prediction: null } as never]), []);
    expect(shared.map((r) => [r.id, r.met, r.measured])).toEqual([['capacity-band-2-workers', null, 'n/a']]);
  });
});
