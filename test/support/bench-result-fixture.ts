import type { BenchResult } from '../../services/bench/bench-result.ts';
import { predictOnHost, type HandoffCosts } from '../../services/bench/capacity-model.ts';
import { latencyHistogram } from '../../services/bench/plot-data.ts';
import type { DeliveryRun } from '../../services/bench/scenarios/delivery.ts';
import type { UsagePerHandoff } from '../../services/bench/usage.ts';

/** A bench result with the plots' data in it, and text a page must escape (test/unit/bench-html-report.test.ts, test/e2e/bench-html-page.test.ts). */
const usage = (workers: number): UsagePerHandoff => ({
  cpuMs: { api: 0.3, workers, demoHost: 0.1, postgres: 0.5, redis: 0.05, loadGenerator: 0.2, total: 1.15 + workers },
  postgresStatements: 0.4,
  redisCommands: 9,
  postgresWalBytes: 3000,
  windowSeconds: 10,
  otherProcessesCpuMs: 0.1,
});

const load = (latencies: number[]) => ({
  requests: latencies.length,
  errors: 0,
  seconds: 1,
  perSecond: latencies.length,
  p50Ms: 5,
  p99Ms: 9,
  statuses: { '201': latencies.length },
  latency: latencyHistogram(latencies),
});

export const delivery: DeliveryRun = {
  agents: 10,
  handoffs: 6,
  returned: 6,
  acceptedPerSec: 3,
  returnedPerSec: 3,
  acceptedP50Ms: 4,
  acceptedP99Ms: 40,
  returnedP50Ms: 5,
  returnedP99Ms: 50,
  dispatchP50Ms: 2,
  dispatchP99Ms: 20,
  series: {
    latency: { dispatch: latencyHistogram([1, 2, 20]), accepted: latencyHistogram([4, 40]), returned: latencyHistogram([5, 6, 50]) },
    perSecond: { sent: [4, 2], returned: [1, 3, 2] },
  },
  send: load([3, 4]),
  cost: {
    apiRssMiB: 100,
    workerRssMiB: [90, 91],
    demoHostRssMiB: 80,
    redisConnectionsPerWorker: [5, 5],
    redisConnectionsApi: 1,
    postgresConnections: { api: 10 },
    redisBytesPerQueuedHandoff: 100,
    queuedAtPeak: 3,
  },
  perHandoff: usage(0.8),
  warmUp: { handoffs: 50, perHandoff: usage(2.4) },
};

const costs: HandoffCosts = {
  cpuMs: { api: 0.3, workers: 0.8, postgres: 0.5, redis: 0.05, demoHost: 0.1, loadGenerator: 0.2 },
  postgresStatements: 0.4,
  postgresWalBytes: 3000,
  redisCommands: 9,
};
const prediction = predictOnHost(costs, { cores: 2, otherCores: 0.2, workers: 2, apiProcesses: 1 });

/** A run's result with the plots' data in it, and text a page must escape. */
export const fixture: BenchResult = {
  version: 1,
  mode: 'quick',
  startedAt: '2026-12-08T00:00:00.000Z',
  seconds: 60,
  machine: { cpus: 2, node: '20.20.2', postgres: '18.4', redis: '7.0.15', embeddedPostgres: true, embeddedRedis: true },
  send: {
    oneClient: load([1, 2, 3]),
    thirtyTwoClients: load([5, 9, 30]),
    thirtyTwoClientsCost: usage(0),
    redisBytesPerQueuedHandoff: 10,
    redisBytesPerWaitingAgent: 100,
    recipients: 100,
    queuedHandoffs: 600,
  },
  delivery: [delivery],
  capacity: {
    cores: 2,
    calibration: { workers: 2, costs },
    runs: [
      {
        workers: 2,
        agents: 100,
        handoffs: 500,
        returnedPerSec: Math.round(prediction.handoffsPerSec.mid),
        perHandoff: usage(0.8),
        postgres: { cores: 0.3, statementsPerSec: 300, walBytesPerSec: 2e6 },
        redis: { commandsPerSec: 6000, cores: 0.03 },
        otherCores: 0.2,
        prediction,
        withinBand: { throughput: true, postgres: true },
        series: delivery.series!,
      },
    ],
    redisMsPerCommand: 0.006,
    redisBytesPerAgent: 120,
    redisCommandsPerHandoff: { evalsha: 2 },
  },
  targets: [
    {
      id: 'x',
      name: 'CPU <per> handoff & "more" <img src=x onerror=alert(1)>',
      goal: '<= 1.5 ms',
      measured: '1.2 ms',
      value: 1.2,
      met: true,
    },
    { id: 'y', name: 'End to end', goal: '>= 1000/s', measured: '900/s', value: 900, met: false },
    { id: 'z', name: 'Send p99', goal: '<= 40 ms', measured: 'n/a', value: null, met: null },
  ],
  guarantees: [{ name: 'busy agents: </script><b>bold</b>', goal: 'all 0', measured: '0/0/0', met: true }],
};
