import os from 'node:os';
import type { BatonConfig } from '../../libs/config/load-config.ts';
import { BenchEnvironment, DEFAULT_TUNING } from './bench-environment.ts';
import { Progress, round } from './measure.ts';
import { evaluateTargets, renderReport, type BenchResult } from './report.ts';
import { measureBusyAgents } from './scenarios/busy-agents.ts';
import { measureCeilings } from './scenarios/ceilings.ts';
import { measureDelivery } from './scenarios/delivery.ts';
import { measureDispatchLatency } from './scenarios/dispatch-latency.ts';
import { measureRecovery } from './scenarios/recovery.ts';
import { measureSend } from './scenarios/send.ts';

export interface BenchOptions {
  quick: boolean;
  json: boolean;
  /** Show the progress bar (stderr). */
  progress: boolean;
  tty: boolean;
}

/** Sizes: `--quick` is a CI smoke run (well under a minute); full is the real measurement. */
export function benchSizes(quick: boolean) {
  return quick
    ? { ceilingSeconds: 1, bullmqJobs: 1_000, sendOne: 100, sendMany: 400, agentCounts: [10, 100], handoffs: 200, latencyHandoffs: 100, busyAgents: 10, busyPerAgent: 10, wipeHandoffs: 150 }
    : { ceilingSeconds: 5, bullmqJobs: 20_000, sendOne: 2_000, sendMany: 10_000, agentCounts: [10, 1_000, 10_000], handoffs: 10_000, latencyHandoffs: 1_000, busyAgents: 100, busyPerAgent: 50, wipeHandoffs: 3_000 };
}

/**
 * `npm run bench`: runs every scenario on real processes and the embedded-or-configured
 * Postgres and Redis, and returns the figures (the CLI prints the table or JSON).
 */
export async function runBench(config: BatonConfig, opts: BenchOptions, write: (s: string) => void): Promise<BenchResult> {
  const sizes = benchSizes(opts.quick);
  const steps = 2 + 2 + sizes.agentCounts.length * 2 + 1 + 2 + 2 + 1;
  const progress = new Progress(steps, opts.progress, opts.tty, write);
  const startedAt = new Date();
  const t0 = performance.now();
  progress.show('starting Postgres, Redis and the demo sessions');
  const env = await BenchEnvironment.start(config, DEFAULT_TUNING, (s) => progress.show(s));
  progress.step('environment ready');
  try {
    const pgVersion = (await env.pool.query<{ v: string }>(`SELECT current_setting('server_version') AS v`)).rows[0]?.v ?? '?';
    const redisVersion = /redis_version:(\S+)/.exec(await env.redis.info('server'))?.[1] ?? '?';
    progress.show('ceilings: raw Postgres and BullMQ');
    const ceilings = await measureCeilings(env, { seconds: sizes.ceilingSeconds, jobs: sizes.bullmqJobs });
    progress.step('ceilings measured');
    const client = await env.startApi();
    const send = await measureSend(env, client, { one: sizes.sendOne, many: sizes.sendMany }, () => progress.step('send measured'));
    await env.stopApi();
    client.close();
    const delivery = [];
    for (const agents of sizes.agentCounts) {
      progress.show(`e2e with ${agents} agents`);
      delivery.push(await measureDelivery(env, agents, sizes.handoffs, !opts.quick, (label) => progress.step(label)));
    }
    progress.show('dispatch latency at a steady 50/s');
    const dispatchLatency = await measureDispatchLatency(env, { agents: 100, perSecond: 50, handoffs: sizes.latencyHandoffs }, !opts.quick, (label) => progress.step(label));
    progress.show('busy agents');
    const busyAgents = await measureBusyAgents(env, sizes.busyAgents, sizes.busyPerAgent, !opts.quick, (label) => progress.step(label));
    progress.show('recovery');
    const recovery = await measureRecovery(env, sizes.wipeHandoffs, !opts.quick, (label) => progress.step(label));
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
      ceilings,
      send,
      delivery,
      dispatchLatency,
      busyAgents,
      recovery,
    };
    return { ...partial, targets: evaluateTargets(partial) };
  } finally {
    progress.show('cleaning up');
    await env.close();
    progress.step('done');
    progress.end();
  }
}

export { renderReport };
