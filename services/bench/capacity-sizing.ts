import { fleetCapacity, type FleetCosts, type FleetSpec } from './capacity-model.ts';

/**
 * The costs docs/CAPACITY.md sizes a fleet with (the page lists each with where it was
 * measured); test/unit/capacity-doc.test.ts holds the page's table to `sizingTable()`.
 */
export const SIZING_COSTS: FleetCosts = {
  handoff: {
    // 2026-12-01 18:11 full run, 10,000 agents (docs/PERFORMANCE.md, "Where the time goes").
    cpuMs: { api: 0.214, workers: 0.616, postgres: 0.534, redis: 0.048, demoHost: 0, loadGenerator: 0 },
    postgresStatements: 0.19,
    // The capacity runs of 2026-12-08 (docs/CAPACITY.md, "Measured here").
    postgresWalBytes: 7100,
    redisCommands: 9.31,
  },
  redisMsPerCommand: 0.048 / 9.31,
  // A watcher's re-read by primary key: an estimate (docs/CAPACITY.md, "What it leaves out").
  postgresMsPerTurnStatement: 0.05,
  redisBytesPerAgent: 120,
  redisBytesPerQueuedHandoff: 1024,
  liveTurn: { redisCommandsPerSec: 3.684, postgresStatementsPerSec: 0.523, workerCpuMsPerSec: 0.289, workerRssKiB: 55.1 },
};

/** The deployment's settings in every row: Baton's defaults, 64 MiB per worker for followed turns. */
const base: Omit<FleetSpec, 'postgres' | 'redis'> = {
  deliveryQueues: 4,
  dbPoolSize: 10,
  processUtilization: 0.7,
  turnSlotsPerWorker: 256,
  workerMemoryForTurnsBytes: 64 * 1024 ** 2,
};

/** The servers of each row: connections as a managed service of that size allows, 4 GiB per Redis primary. */
export const SIZES: Array<{ vcpus: number; connections: number; primaries: number }> = [
  { vcpus: 2, connections: 100, primaries: 1 },
  { vcpus: 4, connections: 200, primaries: 1 },
  { vcpus: 8, connections: 400, primaries: 1 },
  { vcpus: 16, connections: 800, primaries: 1 },
  { vcpus: 16, connections: 800, primaries: 3 },
  { vcpus: 32, connections: 1600, primaries: 3 },
  { vcpus: 64, connections: 3000, primaries: 3 },
  { vcpus: 64, connections: 3000, primaries: 6 },
];

const k = (n: number) => (n >= 10_000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${Math.round(n / 100) / 10}k` : String(Math.round(n)));

/** docs/CAPACITY.md's sizing table, in Markdown: fleetCapacity for each row of SIZES. */
export function sizingTable(): string {
  const rows = [
    '| Postgres primary | Redis primaries | handoffs/s | runs out first | processes at that rate (API + workers) | live long turns | runs out first |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const s of SIZES) {
    const f = fleetCapacity(SIZING_COSTS, {
      ...base,
      postgres: { vcpus: s.vcpus, utilization: 0.7, connections: s.connections, walBytesPerSec: 100 * 1024 * 1024 },
      redis: { primaries: s.primaries, utilization: 0.7, memoryBytes: 4 * 1024 ** 3 },
    });
    rows.push(
      `| ${s.vcpus} vCPU, ${s.connections} connections | ${s.primaries} | ${k(f.handoffsPerSec.value)} | ${f.handoffsPerSec.limitedBy} | ${f.processesAtLimit.api} + ${f.processesAtLimit.workers} | ${k(f.liveTurns.value)} | ${f.liveTurns.limitedBy} |`,
    );
  }
  return rows.join('\n');
}
