import type { BusyAgentsResult } from './scenarios/busy-agents.ts';
import type { Ceilings } from './scenarios/ceilings.ts';
import type { DeliveryRun } from './scenarios/delivery.ts';
import type { DispatchLatencyResult } from './scenarios/dispatch-latency.ts';
import type { RecoveryResult } from './scenarios/recovery.ts';
import type { SendResults } from './scenarios/send.ts';
import { round } from './measure.ts';

export interface BenchResult {
  version: 1;
  mode: 'quick' | 'full';
  startedAt: string;
  seconds: number;
  machine: { cpus: number; node: string; postgres: string; redis: string; embeddedPostgres: boolean; embeddedRedis: boolean };
  ceilings: Ceilings;
  send: SendResults;
  delivery: DeliveryRun[];
  dispatchLatency: DispatchLatencyResult;
  busyAgents: BusyAgentsResult;
  recovery: RecoveryResult;
  targets: Target[];
}

export interface Target {
  name: string;
  goal: string;
  measured: string;
  met: boolean;
}

/** The targets, evaluated on a result. */
export function evaluateTargets(r: Omit<BenchResult, 'targets'>): Target[] {
  const send32 = r.send.thirtyTwoClients;
  const ref = r.delivery.find((d) => d.agents === 10) ?? r.delivery[0];
  const most = r.delivery.at(-1);
  const t: Target[] = [];
  const add = (name: string, goal: string, measured: string, met: boolean) => t.push({ name, goal, measured, met });
  const ratio = send32.perSecond / Math.max(1, r.ceilings.postgres8);
  add('send throughput vs raw Postgres (8 connections)', '>= 40%', `${round(ratio * 100, 0)}%`, ratio >= 0.4);
  add('send p99 at 32 clients', '<= 25 ms', `${send32.p99Ms} ms`, send32.p99Ms <= 25);
  if (ref) {
    add(`handoffs/s to ACCEPTED (${ref.agents} agents)`, '>= 1000/s', `${ref.acceptedPerSec}/s`, ref.acceptedPerSec >= 1000);
    add(`handoffs/s to RETURNED (${ref.agents} agents)`, '>= 500/s', `${ref.returnedPerSec}/s`, ref.returnedPerSec >= 500);
  }
  const lat = r.dispatchLatency;
  add(`dispatch latency p50 (commit to adapter call, steady ${lat.perSecond}/s)`, '<= 10 ms', `${lat.dispatchP50Ms} ms`, lat.dispatchP50Ms <= 10);
  add(`dispatch latency p99 (steady ${lat.perSecond}/s)`, '<= 50 ms', `${lat.dispatchP99Ms} ms`, lat.dispatchP99Ms <= 50);
  if (ref) {
    // Under a backlog the same path also includes queueing behind earlier handoffs.
    add(`dispatch latency p50 (saturated, ${ref.agents} agents)`, '<= 10 ms', `${ref.dispatchP50Ms} ms`, ref.dispatchP50Ms <= 10);
    add(`dispatch latency p99 (saturated, ${ref.agents} agents)`, '<= 50 ms', `${ref.dispatchP99Ms} ms`, ref.dispatchP99Ms <= 50);
  }
  if (ref && most && most !== ref) {
    const keep = most.acceptedPerSec / Math.max(1, ref.acceptedPerSec);
    add(`throughput at ${most.agents} agents vs ${ref.agents}`, '>= 80%', `${round(keep * 100, 0)}%`, keep >= 0.8);
    const a = ref.cost.redisConnectionsPerWorker;
    const b = most.cost.redisConnectionsPerWorker;
    add(`Redis connections per worker, ${most.agents} vs ${ref.agents} agents`, 'the same', `${b.join('/')} vs ${a.join('/')}`, JSON.stringify(a) === JSON.stringify(b));
  }
  add('worker SIGKILL -> UNCERTAIN', '<= 5 s', `${r.recovery.killToUncertainSec} s`, r.recovery.killToUncertainSec <= 5);
  add('Redis wipe -> all handoffs final', '<= 10 s', `${r.recovery.wipeToFinalSec} s`, r.recovery.wipeToFinalSec <= 10);
  add('busy agents: no overlapping turns, order held, one write each', 'all 0', `${r.busyAgents.overlappingTurns}/${r.busyAgents.agentsOutOfOrder}/${r.busyAgents.handoffsNotWrittenOnce}`, r.busyAgents.overlappingTurns + r.busyAgents.agentsOutOfOrder + r.busyAgents.handoffsNotWrittenOnce === 0);
  return t;
}

const pct = (a: number, b: number) => (b > 0 ? `${round((a / b) * 100, 0)}%` : '-');

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c]!)).join('  ').trimEnd()).join('\n');
}

/** The human-readable report: one table of figures beside their ceilings, then the targets. */
export function renderReport(r: BenchResult): string {
  const c = r.ceilings;
  const rows: string[][] = [['measure', 'Baton', 'ceiling', 'of ceiling', 'latency p50 / p99']];
  rows.push(['raw Postgres insert+event, 1 connection', '', `${c.postgres1} tx/s`, '', '']);
  rows.push(['raw Postgres insert+event, 8 connections', '', `${c.postgres8} tx/s`, '', '']);
  rows.push(['raw BullMQ add+process (no-op jobs)', '', `${c.bullmq} jobs/s`, '', '']);
  const s1 = r.send.oneClient;
  const s32 = r.send.thirtyTwoClients;
  rows.push(['send over HTTP, 1 client', `${s1.perSecond}/s`, `${c.postgres1} tx/s (pg x1)`, pct(s1.perSecond, c.postgres1), `${s1.p50Ms} / ${s1.p99Ms} ms`]);
  rows.push(['send over HTTP, 32 clients', `${s32.perSecond}/s`, `${c.postgres8} tx/s (pg x8)`, pct(s32.perSecond, c.postgres8), `${s32.p50Ms} / ${s32.p99Ms} ms`]);
  for (const d of r.delivery) {
    rows.push([`e2e ${d.agents} agents, ${d.handoffs} handoffs: to ACCEPTED`, `${d.acceptedPerSec}/s`, `${c.bullmq} jobs/s (bullmq)`, pct(d.acceptedPerSec, c.bullmq), `${d.acceptedP50Ms} / ${d.acceptedP99Ms} ms`]);
    rows.push([`e2e ${d.agents} agents: to RETURNED`, `${d.returnedPerSec}/s`, `${c.postgres8} tx/s (pg x8)`, pct(d.returnedPerSec, c.postgres8), `${d.returnedP50Ms} / ${d.returnedP99Ms} ms`]);
    rows.push([`e2e ${d.agents} agents: dispatch (commit -> adapter call)`, '', '', '', `${d.dispatchP50Ms} / ${d.dispatchP99Ms} ms`]);
  }
  const lat = r.dispatchLatency;
  rows.push([`steady ${lat.perSecond}/s to ${lat.agents} idle agents: dispatch`, '', '', '', `${lat.dispatchP50Ms} / ${lat.dispatchP99Ms} ms`]);
  rows.push([`steady ${lat.perSecond}/s: to RETURNED`, '', '', '', `${lat.returnedP50Ms} / ${lat.returnedP99Ms} ms`]);
  const b = r.busyAgents;
  rows.push([`busy: ${b.agents} agents x ${b.handoffsPerAgent} at once`, `${b.totalSeconds} s total`, '', '', `overlaps ${b.overlappingTurns}, out of order ${b.agentsOutOfOrder}, not once ${b.handoffsNotWrittenOnce}`]);
  rows.push(['recovery: SIGKILL mid-write -> UNCERTAIN', `${r.recovery.killToUncertainSec} s`, '', '', '']);
  rows.push([`recovery: Redis wipe (${r.recovery.openAtWipe} open) -> all final`, `${r.recovery.wipeToFinalSec} s`, '', '', '']);
  rows.push(['recovery: Redis wipe -> longest stall in delivery', `${r.recovery.stallAfterWipeSec} s`, '', '', '']);
  const cost: string[][] = [['cost', ...r.delivery.map((d) => `${d.agents} agents`)]];
  cost.push(['API peak RSS (MiB)', ...r.delivery.map((d) => String(d.cost.apiRssMiB))]);
  cost.push(['worker peak RSS (MiB)', ...r.delivery.map((d) => d.cost.workerRssMiB.join(' / '))]);
  cost.push(['demo-host peak RSS (MiB)', ...r.delivery.map((d) => String(d.cost.demoHostRssMiB))]);
  cost.push(['Redis connections per worker', ...r.delivery.map((d) => d.cost.redisConnectionsPerWorker.join(' / '))]);
  cost.push(['Redis connections, API', ...r.delivery.map((d) => String(d.cost.redisConnectionsApi))]);
  cost.push([
    'Redis memory per queued handoff',
    ...r.delivery.map((d) => (d.cost.redisBytesPerQueuedHandoff === null ? 'n/a' : `${d.cost.redisBytesPerQueuedHandoff} bytes (${d.cost.queuedAtPeak} queued)`)),
  ]);
  cost.push(['Postgres connections', ...r.delivery.map((d) => Object.entries(d.cost.postgresConnections).map(([k, v]) => `${k} ${v}`).join(', '))]);
  const per = (f: (d: DeliveryRun) => number | null) =>
    r.delivery.map((d) => {
      const v = f(d);
      return v === null ? 'n/a' : String(v);
    });
  cost.push(['CPU ms per handoff, all processes', ...per((d) => d.perHandoff.cpuMs.total)]);
  for (const [role, label] of [
    ['postgres', 'Postgres'],
    ['workers', 'workers (both)'],
    ['api', 'API'],
    ['loadGenerator', 'load generator'],
    ['demoHost', 'demo host'],
    ['redis', 'Redis'],
  ] as const) {
    cost.push([`  of which ${label}`, ...per((d) => d.perHandoff.cpuMs[role])]);
  }
  cost.push(['Postgres statements per handoff', ...per((d) => d.perHandoff.postgresStatements)]);
  cost.push(['Redis commands per handoff', ...per((d) => d.perHandoff.redisCommands)]);
  cost.push([
    'Redis memory, nothing delivering',
    `${r.send.redisBytesPerQueuedHandoff} bytes per handoff, ${r.send.redisBytesPerWaitingAgent} per agent (${r.send.thirtyTwoClients.requests} handoffs to ${r.send.recipients} agents)`,
  ]);
  const targets: string[][] = [['target', 'goal', 'measured', 'met']];
  for (const t of r.targets) targets.push([t.name, t.goal, t.measured, t.met ? 'yes' : 'NO']);
  return [
    `Baton benchmark (${r.mode}), ${r.startedAt}, ${r.seconds} s; ${r.machine.cpus} cores, Node ${r.machine.node}, Postgres ${r.machine.postgres}${r.machine.embeddedPostgres ? ' (embedded)' : ''}, Redis ${r.machine.redis}${r.machine.embeddedRedis ? ' (private)' : ''}`,
    '',
    table(rows),
    '',
    table(cost),
    '',
    table(targets),
  ].join('\n');
}
