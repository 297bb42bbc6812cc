import os from 'node:os';
import type { BatonConfig } from '../../libs/config/load-config.ts';
import { BenchEnvironment, DEFAULT_TUNING } from './bench-environment.ts';
import { Progress, round } from './measure.ts';
import type { BenchResult } from './bench-result.ts';
import { parseScenarios, parseWorkerCounts, type BenchScenario } from './bench-scenarios.ts';
import { renderHtmlReport } from './html-report.ts';
import { renderReport } from './report.ts';
import { measureCapacity } from './scenarios/capacity.ts';
import { measureBusyAgents } from './scenarios/busy-agents.ts';
import { measureCeilings } from './scenarios/ceilings.ts';
import { measureDelivery } from './scenarios/delivery.ts';
import { measureDispatchLatency } from './scenarios/dispatch-latency.ts';
import { measureLongTurns } from './scenarios/long-turns.ts';
import { measureRecovery } from './scenarios/recovery.ts';
import { measureSend } from './scenarios/send.ts';
import { measureRoleRouting } from './scenarios/role-routing.ts';
import { measureStartup } from './scenarios/startup.ts';
import { evaluateTargets } from './targets.ts';
import { evaluateGuarantees } from './guarantees.ts';

export interface BenchOptions {
  quick: boolean;
  json: boolean;
  /** Show the progress bar (stderr). */
  progress: boolean;
  tty: boolean;
  /** Run only these scenarios (`--only long-turns`); all of them when absent. */
  only?: readonly BenchScenario[];
  /** Worker process counts of the capacity runs (`--workers 1,2,4`); the sizes' default when absent. */
  workers?: readonly number[];
}

/** The role-routing scenario's ten agents: turns of 20 ms to 200 ms (uneven: the slowest is ten times the fastest). */
const ROLE_TURN_MS = Array.from({ length: 10 }, (_, i) => 20 + 20 * i);

/** Sizes: `--quick` is a CI smoke run (well under a minute); full is the real measurement. */
export function benchSizes(quick: boolean) {
  return quick
    ? {
        ceilingSeconds: 1,
        bullmqJobs: 1_000,
        sendOne: 100,
        sendMany: 400,
        agentCounts: [10, 100],
        handoffs: 200,
        warmUp: 50,
        latency: { agents: 100, perSecond: 200, handoffs: 200 },
        busyAgents: 10,
        busyPerAgent: 10,
        wipeHandoffs: 150,
        longTurns: { turns: 40, turnMs: 6_000, quietMs: 2_000 },
        roleRouting: { handoffs: 100, turnMs: ROLE_TURN_MS },
        starts: 1,
        capacity: { workers: [1, 2], agents: 100, handoffs: 300, warmUp: 50 },
      }
    : {
        ceilingSeconds: 5,
        bullmqJobs: 20_000,
        sendOne: 2_000,
        sendMany: 10_000,
        agentCounts: [10, 1_000, 10_000],
        handoffs: 10_000,
        warmUp: 1_000,
        // Issue 36: dispatch at a steady 200/s to 1,000 idle agents (10 s of sends).
        latency: { agents: 1_000, perSecond: 200, handoffs: 2_000 },
        busyAgents: 100,
        busyPerAgent: 50,
        wipeHandoffs: 3_000,
        // 1,000 turns do not fit the default 2 workers x 4 shards x 64 = 512 slots (and the shards
        // fill unevenly): these workers run with BATON_WORKER_CONCURRENCY=256 (2,048 slots).
        longTurns: { turns: 1_000, turnMs: 30_000, quietMs: 5_000, workerConcurrency: 256 },
        roleRouting: { handoffs: 500, turnMs: ROLE_TURN_MS },
        starts: 5,
        capacity: { workers: [1, 2, 4], agents: 1_000, handoffs: 5_000, warmUp: 1_000 },
      };
}

/**
 * `npm run bench`: runs every scenario on real processes and the embedded-or-configured
 * Postgres and Redis, and returns the figures (the CLI prints the table or JSON).
 */
export async function runBench(config: BatonConfig, opts: BenchOptions, write: (s: string) => void): Promise<BenchResult> {
  const sizes = benchSizes(opts.quick);
  const want = (s: BenchScenario) => !opts.only || opts.only.includes(s);
  const steps =
    2 +
    (want('ceilings') ? 1 : 0) +
    (want('send') ? 2 : 0) +
    (want('delivery') ? sizes.agentCounts.length * 3 : 0) +
    (want('dispatch-latency') ? 1 : 0) +
    (want('busy-agents') ? 2 : 0) +
    (want('recovery') ? 2 : 0) +
    (want('long-turns') ? 3 : 0) +
    (want('role-routing') ? 3 : 0) +
    (want('startup') ? 2 : 0) +
    (want('capacity') ? (opts.workers ?? sizes.capacity.workers).length : 0);
  const progress = new Progress(steps, opts.progress, opts.tty, write);
  const startedAt = new Date();
  const t0 = performance.now();
  progress.show('starting Postgres, Redis and the demo sessions');
  const env = await BenchEnvironment.start(config, DEFAULT_TUNING, (s) => progress.show(s));
  progress.step('environment ready');
  try {
    const pgVersion = (await env.pool.query<{ v: string }>(`SELECT current_setting('server_version') AS v`)).rows[0]?.v ?? '?';
    const redisVersion = /redis_version:(\S+)/.exec(await env.redis.info('server'))?.[1] ?? '?';
    let ceilings;
    if (want('ceilings')) {
      progress.show('ceilings: raw Postgres and BullMQ');
      ceilings = await measureCeilings(env, { seconds: sizes.ceilingSeconds, jobs: sizes.bullmqJobs });
      progress.step('ceilings measured');
    }
    let send;
    if (want('send')) {
      const client = await env.startApi();
      send = await measureSend(env, client, { one: sizes.sendOne, many: sizes.sendMany }, () => progress.step('send measured'));
      await env.stopApi();
      client.close();
    }
    let delivery;
    if (want('delivery')) {
      delivery = [];
      for (const agents of sizes.agentCounts) {
        progress.show(`e2e with ${agents} agents`);
        delivery.push(await measureDelivery(env, agents, sizes.handoffs, !opts.quick, sizes.warmUp, (label) => progress.step(label)));
      }
    }
    let dispatchLatency;
    if (want('dispatch-latency')) {
      progress.show(`dispatch latency at a steady ${sizes.latency.perSecond}/s`);
      dispatchLatency = await measureDispatchLatency(env, sizes.latency, !opts.quick, (label) => progress.step(label));
    }
    let busyAgents;
    if (want('busy-agents')) {
      progress.show('busy agents');
      busyAgents = await measureBusyAgents(env, sizes.busyAgents, sizes.busyPerAgent, !opts.quick, (label) => progress.step(label));
    }
    let recovery;
    if (want('recovery')) {
      progress.show('recovery');
      recovery = await measureRecovery(env, sizes.wipeHandoffs, !opts.quick, (label) => progress.step(label));
    }
    let longTurns;
    if (want('long-turns')) {
      progress.show(`long turns: ${sizes.longTurns.turns} turns of ${sizes.longTurns.turnMs / 1000} s`);
      longTurns = await measureLongTurns(env, sizes.longTurns, !opts.quick, (label) => progress.step(label));
    }
    let roleRouting;
    if (want('role-routing')) {
      progress.show(`role routing: ${sizes.roleRouting.handoffs} handoffs to a role of ${sizes.roleRouting.turnMs.length}`);
      roleRouting = await measureRoleRouting(env, sizes.roleRouting, !opts.quick, (label) => progress.step(label));
    }
    let startup;
    if (want('startup')) {
      progress.show('time to ready: API and worker starts');
      startup = await measureStartup(env, sizes.starts, (label) => progress.step(label));
    }
    let capacity;
    if (want('capacity')) {
      const workers = opts.workers ?? sizes.capacity.workers;
      progress.show(`capacity: ${workers.join(', ')} worker processes`);
      capacity = await measureCapacity(env, { ...sizes.capacity, workers }, (label) => progress.step(label));
    }
    const partial = {
      version: 1 as const,
      mode: opts.quick ? ('quick' as const) : ('full' as const),
      startedAt: startedAt.toISOString(),
      seconds: round((performance.now() - t0) / 1000, 1),
      machine: {
        cpus: os.cpus().length,
        node: process.versions.node,
        postgres: pgVersion,
        redis: redisVersion,
        embeddedPostgres: env.embedded.postgres,
        embeddedRedis: env.embedded.redis,
      },
      ...(opts.only ? { only: [...opts.only] } : {}),
      ...(ceilings ? { ceilings } : {}),
      ...(send ? { send } : {}),
      ...(delivery ? { delivery } : {}),
      ...(dispatchLatency ? { dispatchLatency } : {}),
      ...(busyAgents ? { busyAgents } : {}),
      ...(recovery ? { recovery } : {}),
      ...(longTurns ? { longTurns } : {}),
      ...(roleRouting ? { roleRouting } : {}),
      ...(startup ? { startup } : {}),
      ...(capacity ? { capacity } : {}),
    };
    return { ...partial, targets: evaluateTargets(partial), guarantees: evaluateGuarantees(partial) };
  } finally {
    progress.show('cleaning up');
    await env.close();
    progress.step('done');
    progress.end();
  }
}

// The CLI's `bench` command loads this one module lazily, and reads these from it too.
export { parseScenarios, parseWorkerCounts, renderHtmlReport, renderReport };
