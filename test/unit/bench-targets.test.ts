import { describe, expect, it } from 'vitest';
import { renderReport } from '../../services/bench/report.ts';
import type { DeliveryRun } from '../../services/bench/scenarios/delivery.ts';
import type { Target } from '../../services/bench/bench-result.ts';
import { BASELINE_RETURNED_PER_SEC_10_AGENTS, evaluateTargets, TARGETS, type Measurements } from '../../services/bench/targets.ts';
import { evaluateGuarantees } from '../../services/bench/guarantees.ts';

const load = (perSecond: number, p99Ms: number) => ({
  requests: 10_000,
  errors: 0,
  seconds: 10,
  perSecond,
  p50Ms: 5,
  p99Ms,
  statuses: { '201': 10_000 },
});

/** A fabricated e2e run whose figures sit exactly at issue 16's goals unless overridden. */
function run(
  agents: number,
  o: { cpuTotal: number; statements: number | null; redisCommands: number | null; returnedPerSec: number; redisBytes?: number | null },
): DeliveryRun {
  return {
    agents,
    handoffs: 10_000,
    returned: 10_000,
    acceptedPerSec: o.returnedPerSec,
    returnedPerSec: o.returnedPerSec,
    acceptedP50Ms: 1,
    acceptedP99Ms: 2,
    returnedP50Ms: 1,
    returnedP99Ms: 2,
    dispatchP50Ms: 1,
    dispatchP99Ms: 2,
    send: load(700, 30),
    cost: {
      apiRssMiB: 200,
      workerRssMiB: [200, 150],
      demoHostRssMiB: 150,
      redisConnectionsPerWorker: [5, 5],
      redisConnectionsApi: 1,
      postgresConnections: { api: 10 },
      redisBytesPerQueuedHandoff: o.redisBytes === undefined ? 500 : o.redisBytes,
      queuedAtPeak: 100,
    },
    perHandoff: {
      cpuMs: { api: 0.5, workers: 0.5, demoHost: 0.25, postgres: 0.5, redis: 0.25, loadGenerator: 0.25, total: o.cpuTotal },
      postgresStatements: o.statements,
      redisCommands: o.redisCommands,
    },
    warmUp: null,
  };
}

/** A full run with every target exactly at its goal: the boundary, which counts as met. */
function atGoals(): Measurements {
  const m: Measurements = {
    version: 1,
    mode: 'full',
    startedAt: '2026-12-01T10:00:00.000Z',
    seconds: 300,
    machine: { cpus: 2, node: '20.20.2', postgres: '18.4', redis: '7.0.15', embeddedPostgres: true, embeddedRedis: true },
    ceilings: { postgres1: 2000, postgres8: 1000, bullmq: 6000 },
    send: {
      oneClient: load(200, 10),
      thirtyTwoClients: load(300, 40),
      thirtyTwoClientsCost: {
        cpuMs: { api: 0.3, workers: 0, demoHost: 0, postgres: 0.3, redis: 0.05, loadGenerator: 0.2, total: 0.85 },
        postgresStatements: 0.1,
        redisCommands: 0.2,
      },
      redisBytesPerQueuedHandoff: 1100,
      redisBytesPerWaitingAgent: 110_000,
      recipients: 100,
      queuedHandoffs: 10_000,
    },
    delivery: [
      run(10, { cpuTotal: 2.5, statements: 3, redisCommands: 1.25, returnedPerSec: 741 }),
      run(1000, { cpuTotal: 3.4, statements: 4.5, redisCommands: 20, returnedPerSec: 600 }),
      // 593 / 741 = 80.03%: just over; the ratio's exact boundary is its own case below.
      run(10_000, { cpuTotal: 3.5, statements: 4, redisCommands: 12, returnedPerSec: 593, redisBytes: 1024 }),
    ],
    busyAgents: {
      agents: 100,
      handoffsPerAgent: 50,
      totalSeconds: 30,
      overlappingTurns: 0,
      agentsOutOfOrder: 0,
      handoffsNotWrittenOnce: 0,
    },
    recovery: { killToUncertainSec: 3, openAtWipe: 200, wipeToFinalSec: 9, stallAfterWipeSec: 0.2 },
    dispatchLatency: {
      agents: 1000,
      perSecond: 200,
      handoffs: 2000,
      errors: 0,
      dispatchP50Ms: 5,
      dispatchP99Ms: 20,
      acceptedP50Ms: 6,
      acceptedP99Ms: 25,
      returnedP50Ms: 8,
      returnedP99Ms: 30,
    },
    startup: {
      api: { starts: 5, readyP50Sec: 0.5, readyMaxSec: 0.7, cpuP50Ms: 400 },
      worker: { starts: 5, readyP50Sec: 0.5, readyMaxSec: 0.7, cpuP50Ms: 400 },
    },
  };
  // The warm-up of the 10-agent run at 1.5x its steady 2.5 ms.
  const ten = m.delivery!.find((d) => d.agents === 10)!;
  ten.warmUp = { handoffs: 1_000, perHandoff: { ...ten.perHandoff, cpuMs: { ...ten.perHandoff.cpuMs, total: 3.75 } } };
  return m;
}

const runOf = (m: Measurements, agents: number) => m.delivery!.find((d) => d.agents === agents)!;
const target = (targets: Target[], id: string) => {
  const t = targets.find((x) => x.id === id);
  if (!t) throw new Error(`no target ${id} in ${targets.map((x) => x.id).join(', ')}`);
  return t;
};

describe('issue 16 targets as data', () => {
  it("lists exactly the issue's targets, with the baseline of the 2026-11-29T15:20 run", () => {
    expect(TARGETS.map((t) => t.id)).toEqual([
      'cpu-few',
      'cpu-many',
      'pg-statements-few',
      'pg-statements-many',
      'redis-commands-many',
      'returned-rate-few',
      'returned-rate-many-vs-few',
      'send-vs-postgres',
      'send-p99',
      'redis-bytes-many',
      'api-rss',
      'worker-rss',
      'dispatch-light-p50',
      'dispatch-light-p99',
      'ready-api',
      'ready-worker',
      'warm-up-ratio',
    ]);
    expect(BASELINE_RETURNED_PER_SEC_10_AGENTS).toBe(247);
    expect(TARGETS.find((t) => t.id === 'returned-rate-few')).toMatchObject({ comparison: '>=', goal: 741 });
  });

  it('counts a reading exactly at the goal as met, for every target', () => {
    const targets = evaluateTargets(atGoals());
    expect(targets.map((t) => [t.id, t.met])).toEqual(TARGETS.map((t) => [t.id, true]));
    expect(targets.map((t) => [t.name, t.goal, t.measured])).toEqual([
      ['CPU per handoff, all processes (10 agents)', '<= 2.5 ms', '2.5 ms'],
      ['CPU per handoff, all processes (10000 agents)', '<= 3.5 ms', '3.5 ms'],
      ['Postgres statements per handoff (10 agents)', '<= 3', '3'],
      ['Postgres statements per handoff (10000 agents)', '<= 4', '4'],
      ['Redis commands per handoff (10000 agents)', '<= 12', '12'],
      ['End to end to RETURNED (10 agents)', '>= 741/s (3 x 247/s of the 2026-11-29T15:20 run)', '741/s'],
      ['End to end to RETURNED (10000 vs 10 agents)', '>= 80% (of the rate with 10 agents)', '80%'],
      ['Send vs raw Postgres ceiling at 8 connections (32 clients)', '>= 30%', '30%'],
      ['Send p99 (32 clients)', '<= 40 ms', '40 ms'],
      ['Redis memory per queued handoff (10000 agents)', '<= 1024 bytes', '1024 bytes'],
      ['API peak RSS (e2e runs of 10, 1000, 10000 agents)', '<= 200 MiB', '200 MiB'],
      ['Worker peak RSS, each worker (e2e runs of 10, 1000, 10000 agents)', '<= 200 MiB', '200 MiB'],
      ['Dispatch p50, commit -> adapter call, steady (200/s to 1000 idle agents)', '<= 5 ms', '5 ms'],
      ['Dispatch p99, commit -> adapter call, steady (200/s to 1000 idle agents)', '<= 20 ms', '20 ms'],
      ['API spawn -> ready (median of 5 starts)', '<= 0.5 s', '0.5 s'],
      ['Worker spawn -> ready (median of 5 starts)', '<= 0.5 s', '0.5 s'],
      ['CPU per handoff, warm-up of fresh processes vs steady (10 agents), first 1000', '<= 1.5x (first handoffs over the rest)', '1.5x'],
    ]);
  });

  // For each target: a reading just past the goal (NO), and one this run cannot take (n/a).
  const cases: Array<{
    id: string;
    worse: (m: Measurements) => void;
    measuredWorse: string;
    unavailable: (m: Measurements) => void;
    why: string;
  }> = [
    {
      id: 'cpu-few',
      worse: (m) => void (runOf(m, 10).perHandoff.cpuMs.total = 2.51),
      measuredWorse: '2.51 ms',
      unavailable: (m) => void (runOf(m, 10).perHandoff.cpuMs.postgres = null),
      why: 'a shared Postgres: its CPU is not counted',
    },
    {
      id: 'cpu-many',
      worse: (m) => void (runOf(m, 10_000).perHandoff.cpuMs.total = 3.51),
      measuredWorse: '3.51 ms',
      unavailable: (m) => void (runOf(m, 10_000).perHandoff.cpuMs.redis = null),
      why: 'a shared Redis: its CPU is not counted',
    },
    {
      id: 'pg-statements-few',
      worse: (m) => void (runOf(m, 10).perHandoff.postgresStatements = 3.01),
      measuredWorse: '3.01',
      unavailable: (m) => void (runOf(m, 10).perHandoff.postgresStatements = null),
      why: 'no pg_stat_statements',
    },
    {
      id: 'pg-statements-many',
      worse: (m) => void (runOf(m, 10_000).perHandoff.postgresStatements = 4.01),
      measuredWorse: '4.01',
      unavailable: (m) => void (runOf(m, 10_000).perHandoff.postgresStatements = null),
      why: 'no pg_stat_statements',
    },
    {
      id: 'redis-commands-many',
      worse: (m) => void (runOf(m, 10_000).perHandoff.redisCommands = 12.01),
      measuredWorse: '12.01',
      unavailable: (m) => void (runOf(m, 10_000).perHandoff.redisCommands = null),
      why: 'a shared Redis',
    },
    {
      id: 'returned-rate-few',
      worse: (m) => void (runOf(m, 10).returnedPerSec = 740),
      measuredWorse: '740/s',
      unavailable: (m) => void (m.delivery = []),
      why: 'no e2e run',
    },
    {
      id: 'returned-rate-many-vs-few',
      worse: (m) => void (runOf(m, 10_000).returnedPerSec = 592),
      measuredWorse: '79.9%',
      unavailable: (m) => void (runOf(m, 10).returnedPerSec = 0),
      why: 'no rate to compare with',
    },
    {
      id: 'send-vs-postgres',
      worse: (m) => void (m.send!.thirtyTwoClients.perSecond = 299),
      measuredWorse: '29.9%',
      unavailable: (m) => void delete m.ceilings,
      why: 'no ceiling measured',
    },
    {
      id: 'send-p99',
      worse: (m) => void (m.send!.thirtyTwoClients.p99Ms = 40.01),
      measuredWorse: '40.01 ms',
      unavailable: (m) => void delete m.send,
      why: 'no send measured',
    },
    {
      id: 'redis-bytes-many',
      worse: (m) => void (runOf(m, 10_000).cost.redisBytesPerQueuedHandoff = 1025),
      measuredWorse: '1025 bytes',
      unavailable: (m) => void (runOf(m, 10_000).cost.redisBytesPerQueuedHandoff = null),
      why: 'no backlog at the peak',
    },
    {
      id: 'api-rss',
      worse: (m) => void (runOf(m, 1000).cost.apiRssMiB = 200.1),
      measuredWorse: '200.1 MiB',
      unavailable: (m) => void (runOf(m, 1000).cost.apiRssMiB = null),
      why: 'the API was gone before its peak was read',
    },
    {
      id: 'worker-rss',
      worse: (m) => void (runOf(m, 10).cost.workerRssMiB = [150, 200.1]),
      measuredWorse: '200.1 MiB',
      unavailable: (m) => void (runOf(m, 10).cost.workerRssMiB = [150, null]),
      why: 'a worker was gone before its peak was read',
    },
    {
      id: 'dispatch-light-p50',
      worse: (m) => void (m.dispatchLatency!.dispatchP50Ms = 5.01),
      measuredWorse: '5.01 ms',
      unavailable: (m) => void delete m.dispatchLatency,
      why: 'no steady-rate run',
    },
    {
      id: 'dispatch-light-p99',
      worse: (m) => void (m.dispatchLatency!.dispatchP99Ms = 20.01),
      measuredWorse: '20.01 ms',
      unavailable: (m) => void delete m.dispatchLatency,
      why: 'no steady-rate run',
    },
    {
      id: 'ready-api',
      worse: (m) => void (m.startup!.api.readyP50Sec = 0.501),
      measuredWorse: '0.501 s',
      unavailable: (m) => void delete m.startup,
      why: 'no starts timed',
    },
    {
      id: 'ready-worker',
      worse: (m) => void (m.startup!.worker.readyP50Sec = 0.501),
      measuredWorse: '0.501 s',
      unavailable: (m) => void delete m.startup,
      why: 'no starts timed',
    },
    {
      id: 'warm-up-ratio',
      worse: (m) => void (runOf(m, 10).warmUp!.perHandoff.cpuMs.total = 3.8),
      measuredWorse: '1.52x',
      unavailable: (m) => void (runOf(m, 10).warmUp = null),
      why: 'no warm-up measured',
    },
  ];

  it('has a NO and an n/a case for every target', () => {
    expect(cases.map((c) => c.id)).toEqual(TARGETS.map((t) => t.id));
  });

  for (const c of cases) {
    it(`${c.id}: just past the goal is NO, and only that row fails`, () => {
      const m = atGoals();
      c.worse(m);
      const targets = evaluateTargets(m);
      expect(target(targets, c.id)).toMatchObject({ met: false, measured: c.measuredWorse });
      expect(targets.filter((t) => t.met !== true).map((t) => t.id)).toEqual([c.id]);
    });

    it(`${c.id}: unavailable (${c.why}) is n/a, never yes`, () => {
      const m = atGoals();
      c.unavailable(m);
      expect(target(evaluateTargets(m), c.id)).toMatchObject({ met: null, measured: 'n/a', value: null });
    });
  }

  it('the ratio of many agents to few is met exactly at 80%', () => {
    const m = atGoals();
    runOf(m, 10).returnedPerSec = 750;
    runOf(m, 10_000).returnedPerSec = 600;
    expect(target(evaluateTargets(m), 'returned-rate-many-vs-few')).toMatchObject({ met: true, measured: '80%' });
  });

  it('labels a smaller run with the agent count actually measured (the quick run: 10 and 100 agents)', () => {
    const m: Measurements = { ...atGoals(), mode: 'quick' };
    m.delivery = [runOf(m, 10), { ...runOf(m, 10_000), agents: 100 }];
    const names = evaluateTargets(m).map((t) => t.name);
    expect(names).toContain('CPU per handoff, all processes (10 agents)');
    expect(names).toContain('CPU per handoff, all processes (100 agents; full run: 10000)');
    expect(names).toContain('Postgres statements per handoff (100 agents; full run: 10000)');
    expect(names).toContain('Redis commands per handoff (100 agents; full run: 10000)');
    expect(names).toContain('End to end to RETURNED (100 vs 10 agents; full run: 10000 vs 10 agents)');
    expect(names).toContain('Redis memory per queued handoff (100 agents; full run: 10000)');
    expect(names).toContain('API peak RSS (e2e runs of 10, 100 agents)');
    expect(names.filter((n) => n.includes('10000 agents)'))).toEqual([]);
  });

  it('with one e2e run only, the rows for many agents are n/a rather than read from the 10-agent run', () => {
    const m = atGoals();
    m.delivery = [runOf(m, 10)];
    const targets = evaluateTargets(m);
    for (const id of ['cpu-many', 'pg-statements-many', 'redis-commands-many', 'returned-rate-many-vs-few', 'redis-bytes-many']) {
      expect(target(targets, id), id).toMatchObject({ met: null, measured: 'n/a' });
    }
    expect(target(targets, 'cpu-many').name).toBe('CPU per handoff, all processes (10000 agents)');
  });

  it('leaves out the rows of scenarios that --only skipped', () => {
    const m: Measurements = { ...atGoals(), only: ['send'] };
    delete m.ceilings;
    delete m.delivery;
    expect(evaluateTargets(m).map((t) => t.id)).toEqual(['send-p99']);
  });
});

describe('bench report: targets and guarantees', () => {
  it("prints the warm-up's cost per handoff beside the measured run's, per agent count", () => {
    const m = atGoals();
    const ten = runOf(m, 10);
    ten.warmUp = { handoffs: 1_000, perHandoff: { ...ten.perHandoff, cpuMs: { ...ten.perHandoff.cpuMs, total: 4.75 } } };
    const text = renderReport({ ...m, targets: evaluateTargets(m), guarantees: evaluateGuarantees(m) });
    expect(text).toMatch(/warm-up before: CPU ms per handoff\s+4\.75 \(first 1000 handoffs of fresh processes\)\s+n\/a/);
    expect(text).toMatch(/CPU ms per handoff, all processes\s+2\.5\s/);
  });

  it('prints the targets with yes, NO and n/a, and the guarantees in their own table', () => {
    const m = atGoals();
    runOf(m, 10).perHandoff.postgresStatements = null;
    m.send!.thirtyTwoClients.p99Ms = 98.45;
    runOf(m, 10).warmUp = null;
    const text = renderReport({ ...m, targets: evaluateTargets(m), guarantees: evaluateGuarantees(m) });
    expect(text).toMatch(/target \(issues 16, 36\)\s+goal\s+measured\s+met/);
    expect(text).toMatch(/CPU per handoff, all processes \(10 agents\)\s+<= 2\.5 ms\s+2\.5 ms\s+yes/);
    expect(text).toMatch(/Postgres statements per handoff \(10 agents\)\s+<= 3\s+n\/a\s+n\/a/);
    expect(text).toMatch(/Send p99 \(32 clients\)\s+<= 40 ms\s+98\.45 ms\s+NO/);
    expect(text).toMatch(/guarantee\s+goal\s+measured\s+met/);
    expect(text).toMatch(/Redis connections per worker, 10000 vs 10 agents\s+the same\s+5\/5 vs 5\/5\s+yes/);
    expect(text).toMatch(/worker SIGKILL -> UNCERTAIN\s+<= 5 s\s+3 s\s+yes/);
    expect(text).toMatch(/Redis wipe -> all handoffs final\s+<= 10 s\s+9 s\s+yes/);
    expect(text).toMatch(/busy agents: no overlapping turns, order held, one write each\s+all 0\s+0\/0\/0\s+yes/);
    expect(text).not.toContain('warm-up before');
    // The old round's targets are gone from the table.
    expect(text).not.toContain('handoffs/s to ACCEPTED');
    expect(text).not.toContain('>= 1000/s');
  });
});
