import { describe, expect, it } from 'vitest';
import { TEST_PG_ADMIN_URL, TEST_REDIS_URL } from '../support/env.ts';
import { runBaton } from '../support/spawn-baton.ts';
import { TARGETS } from '../../services/bench/targets.ts';

const isNumber = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v >= 0;

/** Checks the shape of `npm run bench -- --quick --json`, never its speed. */
describe('baton bench --quick --json', () => {
  it('runs every scenario and prints machine-readable results of the documented shape', async () => {
    const { code, output } = await runBaton(
      ['bench', '--quick', '--json', '--no-progress'],
      { DATABASE_URL: TEST_PG_ADMIN_URL, REDIS_URL: TEST_REDIS_URL, BATON_LOG_LEVEL: 'error' },
      360_000,
    );
    expect(code, output.slice(-3000)).toBe(0);
    const start = output.indexOf('{\n');
    const end = output.indexOf('\n}', start);
    const r = JSON.parse(output.slice(start, end + 2));
    expect(r).toMatchObject({ version: 1, mode: 'quick' });
    expect(isNumber(r.seconds)).toBe(true);
    expect(r.machine).toMatchObject({
      cpus: expect.any(Number),
      node: expect.any(String),
      postgres: expect.any(String),
      redis: expect.any(String),
    });
    for (const k of ['postgres1', 'postgres8', 'bullmq']) expect(isNumber(r.ceilings[k]), `ceilings.${k}`).toBe(true);
    for (const k of ['oneClient', 'thirtyTwoClients']) {
      expect(r.send[k]).toMatchObject({ requests: expect.any(Number), errors: 0 });
      for (const f of ['perSecond', 'p50Ms', 'p99Ms']) expect(isNumber(r.send[k][f]), `send.${k}.${f}`).toBe(true);
    }
    expect(isNumber(r.send.redisBytesPerQueuedHandoff)).toBe(true);
    expect(isNumber(r.send.redisBytesPerWaitingAgent)).toBe(true);
    expect(r.send.recipients).toBe(100);
    expect(r.delivery.map((d: any) => d.agents)).toEqual([10, 100]);
    for (const d of r.delivery) {
      // The run's figures are those of its own handoffs, the warm-up's measured apart.
      expect(d.handoffs).toBe(200);
      expect(d.returned).toBe(d.handoffs);
      expect(d.warmUp).toMatchObject({ handoffs: 50 });
      expect(d.warmUp.perHandoff.cpuMs.total).toBeGreaterThan(0);
      for (const f of [
        'acceptedPerSec',
        'returnedPerSec',
        'acceptedP50Ms',
        'acceptedP99Ms',
        'returnedP50Ms',
        'returnedP99Ms',
        'dispatchP50Ms',
        'dispatchP99Ms',
      ]) {
        expect(isNumber(d[f]), `delivery.${d.agents}.${f}`).toBe(true);
      }
      expect(d.cost.redisConnectionsPerWorker).toHaveLength(2);
      // Node processes are always measured; the servers only when the bench runs its own.
      for (const role of ['api', 'workers', 'demoHost', 'loadGenerator', 'total'])
        expect(isNumber(d.perHandoff.cpuMs[role]), `perHandoff.cpuMs.${role}`).toBe(true);
      expect(d.perHandoff.cpuMs.total).toBeGreaterThan(0);
      for (const k of ['postgres', 'redis']) expect(d.perHandoff.cpuMs[k] === null || isNumber(d.perHandoff.cpuMs[k])).toBe(true);
      for (const k of ['postgresStatements', 'redisCommands']) expect(d.perHandoff[k] === null || isNumber(d.perHandoff[k])).toBe(true);
      expect(d.cost.workerRssMiB).toHaveLength(2);
      expect(d.cost.redisBytesPerQueuedHandoff === null || isNumber(d.cost.redisBytesPerQueuedHandoff)).toBe(true);
      expect(isNumber(d.cost.queuedAtPeak)).toBe(true);
    }
    expect(r.dispatchLatency).toMatchObject({ agents: 100, perSecond: 200, handoffs: 200, errors: 0 });
    for (const f of ['dispatchP50Ms', 'dispatchP99Ms', 'acceptedP50Ms', 'returnedP99Ms'])
      expect(isNumber(r.dispatchLatency[f]), `dispatchLatency.${f}`).toBe(true);
    expect(r.busyAgents).toMatchObject({ overlappingTurns: 0, agentsOutOfOrder: 0, handoffsNotWrittenOnce: 0 });
    expect(isNumber(r.recovery.killToUncertainSec)).toBe(true);
    expect(isNumber(r.recovery.wipeToFinalSec)).toBe(true);
    expect(isNumber(r.recovery.stallAfterWipeSec)).toBe(true);
    // Long turns: many agents each in one turn at once, followed to the end, each written once.
    const l = r.longTurns;
    expect(l).toMatchObject({
      turns: 40,
      returned: 40,
      handoffsNotWrittenOnce: 0,
      writeViolations: 0,
      workers: 2,
      queueShards: expect.any(Number),
      workerConcurrency: expect.any(Number),
    });
    expect(l.slots).toBe(l.workers * l.queueShards * l.workerConcurrency);
    expect(l.peakInFlight).toBeGreaterThan(0);
    expect(l.peakInFlight).toBeLessThanOrEqual(40);
    expect(l.turnsPerWorker.reduce((a: number, b: number) => a + b, 0)).toBe(40);
    for (const f of ['turnSeconds', 'lastSendToAllReturnedSec', 'firstSendToLastAcceptedSec', 'liveInWindow', 'quietSeconds'])
      expect(isNumber(l[f]), `longTurns.${f}`).toBe(true);
    expect(typeof l.quietWindowClean).toBe('boolean');
    expect(isNumber(l.queuedJobsInWindow)).toBe(true);
    expect(typeof l.workerWarnings).toBe('object');
    expect(l.workerRssIdleMiB).toHaveLength(2);
    expect(l.workerRssLiveMiB).toHaveLength(2);
    expect(isNumber(l.cpuMsPerSecPerTurn.total)).toBe(true);
    for (const f of ['activeJobsPerLiveTurn', 'redisCommandsPerSecPerTurn', 'postgresStatementsPerSecPerTurn'])
      expect(l[f] === null || isNumber(l[f]), `longTurns.${f}`).toBe(true);
    // The RSS difference can be negative (a GC in between): a number or null, not a size check.
    expect(l.workerRssKiBPerTurn === null || typeof l.workerRssKiBPerTurn === 'number').toBe(true);
    for (const k of ['redisTopCommands', 'postgresTopStatements'])
      expect(l[k] === null || Array.isArray(l[k]), `longTurns.${k}`).toBe(true);
    // The capacity runs (--quick: 1 and 2 workers), each predicted from the 1-worker run's costs.
    expect(r.capacity.calibration.workers).toBe(1);
    expect(r.capacity.runs.map((c: any) => c.workers)).toEqual([1, 2]);
    for (const c of r.capacity.runs) {
      expect(isNumber(c.returnedPerSec), 'capacity.returnedPerSec').toBe(true);
      // A prediction needs every process's CPU: none with a configured (shared) Postgres or Redis, as here.
      expect(c.prediction === null).toBe(r.delivery[0].perHandoff.cpuMs.postgres === null || r.delivery[0].perHandoff.cpuMs.redis === null);
      if (c.prediction) {
        expect(c.prediction.handoffsPerSec.low).toBeLessThanOrEqual(c.prediction.handoffsPerSec.high);
        expect(typeof c.prediction.limitedBy).toBe('string');
        expect(typeof c.withinBand.throughput).toBe('boolean');
      }
      expect(c.postgres.cores === null || isNumber(c.postgres.cores)).toBe(true);
      expect(c.perHandoff.postgresWalBytes === null || isNumber(c.perHandoff.postgresWalBytes)).toBe(true);
      expect(c.series.perSecond.returned.reduce((a: number, b: number) => a + b, 0)).toBe(c.handoffs);
    }
    // The plots' data: latency histograms and per-second counts of every handoff of the run.
    for (const d of r.delivery) expect(d.series.latency.returned.counts.reduce((a: number, b: number) => a + b, 0)).toBe(d.handoffs);
    expect(r.send.thirtyTwoClients.latency.counts.reduce((a: number, b: number) => a + b, 0)).toBe(r.send.thirtyTwoClients.requests);
    // Issue 16's targets, every one of them (met, NO, or n/a where this run cannot measure it), then a capacity row per worker count.
    expect(r.targets.map((t: any) => t.id)).toEqual([...TARGETS.map((t) => t.id), 'capacity-band-1-workers', 'capacity-band-2-workers']);
    for (const t of r.targets) {
      expect(t).toMatchObject({ name: expect.any(String), goal: expect.any(String), measured: expect.any(String) });
      expect(
        t.met === null ? t.measured === 'n/a' && t.value === null : typeof t.met === 'boolean' && isNumber(t.value),
        `${t.id}: ${JSON.stringify(t)}`,
      ).toBe(true);
    }
    // The quick run has no 10,000-agent run: those rows name the 100 agents actually measured.
    expect(r.targets.find((t: any) => t.id === 'cpu-many').name).toBe('CPU per handoff, all processes (100 agents; full run: 10000)');
    // Where the cost row says n/a (no pg_stat_statements on a configured Postgres), so does the target: never yes.
    const statements = r.targets.find((t: any) => t.id === 'pg-statements-few');
    expect(statements.met === null, JSON.stringify(statements)).toBe(r.delivery[0].perHandoff.postgresStatements === null);
    expect(r.guarantees.map((g: any) => g.name)).toContainEqual(expect.stringMatching(/^long turns: /));
    expect(r.guarantees.map((g: any) => g.name)).toContainEqual(expect.stringMatching(/^busy agents: /));
    for (const g of r.guarantees)
      expect(g).toMatchObject({
        name: expect.any(String),
        goal: expect.any(String),
        measured: expect.any(String),
        met: expect.any(Boolean),
      });
    // The human table goes to stderr beside the JSON.
    expect(output).toContain('target (issues 16, 36)');
    expect(output).toContain('guarantee');
  }, 400_000);
});
