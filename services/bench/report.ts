import type { BenchResult } from './bench-result.ts';
import type { Band } from './capacity-model.ts';
import type { CapacityResult } from './scenarios/capacity.ts';
import type { DeliveryRun } from './scenarios/delivery.ts';
import type { LongTurnsResult } from './scenarios/long-turns.ts';
import type { SendResults } from './scenarios/send.ts';
import { round } from './measure.ts';
import type { CpuByRole } from './usage.ts';

const pct = (a: number, b: number) => (b > 0 ? `${round((a / b) * 100, 0)}%` : '-');

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((cell, c) => cell.padEnd(widths[c]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** How the report names each process role. */
const ROLE_LABELS: Record<keyof CpuByRole, string> = {
  postgres: 'Postgres',
  workers: 'workers (both)',
  api: 'API',
  loadGenerator: 'load generator',
  demoHost: 'demo host',
  redis: 'Redis',
};

/** The human-readable report: one table of figures beside their ceilings, the costs, then the targets and the guarantees. */
export function renderReport(r: BenchResult): string {
  const c = r.ceilings;
  const delivery = r.delivery ?? [];
  const rows: string[][] = [['measure', 'Baton', 'ceiling', 'of ceiling', 'latency p50 / p99']];
  if (c) {
    rows.push(['raw Postgres insert+event, 1 connection', '', `${c.postgres1} tx/s`, '', '']);
    rows.push(['raw Postgres insert+event, 8 connections', '', `${c.postgres8} tx/s`, '', '']);
    rows.push(['raw BullMQ add+process (no-op jobs)', '', `${c.bullmq} jobs/s`, '', '']);
  }
  // Without the ceilings (`--only`), the ceiling columns stay empty.
  const pg1 = c?.postgres1 ?? 0;
  const pg8 = c?.postgres8 ?? 0;
  const bull = c?.bullmq ?? 0;
  const ceiling = (text: string) => (c ? text : '');
  const of = (a: number, b: number) => (c ? pct(a, b) : '');
  if (r.send) {
    const s1 = r.send.oneClient;
    const s32 = r.send.thirtyTwoClients;
    rows.push([
      'send over HTTP, 1 client',
      `${s1.perSecond}/s`,
      ceiling(`${pg1} tx/s (pg x1)`),
      of(s1.perSecond, pg1),
      `${s1.p50Ms} / ${s1.p99Ms} ms`,
    ]);
    rows.push([
      'send over HTTP, 32 clients',
      `${s32.perSecond}/s`,
      ceiling(`${pg8} tx/s (pg x8)`),
      of(s32.perSecond, pg8),
      `${s32.p50Ms} / ${s32.p99Ms} ms`,
    ]);
    const cost = r.send.thirtyTwoClientsCost;
    const split = (['api', 'postgres', 'redis', 'loadGenerator'] as const).map(
      (role) => `${ROLE_LABELS[role]} ${cost.cpuMs[role] ?? 'n/a'}`,
    );
    rows.push([
      'send, 32 clients: CPU ms per handoff',
      `${cost.cpuMs.total}`,
      `${split.join(', ')}; ${cost.postgresStatements ?? 'n/a'} statements`,
      '',
      '',
    ]);
  }
  for (const d of delivery) {
    rows.push([
      `e2e ${d.agents} agents, ${d.handoffs} handoffs: to ACCEPTED`,
      `${d.acceptedPerSec}/s`,
      ceiling(`${bull} jobs/s (bullmq)`),
      of(d.acceptedPerSec, bull),
      `${d.acceptedP50Ms} / ${d.acceptedP99Ms} ms`,
    ]);
    rows.push([
      `e2e ${d.agents} agents: to RETURNED`,
      `${d.returnedPerSec}/s`,
      ceiling(`${pg8} tx/s (pg x8)`),
      of(d.returnedPerSec, pg8),
      `${d.returnedP50Ms} / ${d.returnedP99Ms} ms`,
    ]);
    rows.push([`e2e ${d.agents} agents: dispatch (commit -> adapter call)`, '', '', '', `${d.dispatchP50Ms} / ${d.dispatchP99Ms} ms`]);
  }
  const lat = r.dispatchLatency;
  if (lat) {
    rows.push([
      `steady ${lat.perSecond}/s to ${lat.agents} idle agents: dispatch`,
      '',
      '',
      '',
      `${lat.dispatchP50Ms} / ${lat.dispatchP99Ms} ms`,
    ]);
    rows.push([`steady ${lat.perSecond}/s: to RETURNED`, '', '', '', `${lat.returnedP50Ms} / ${lat.returnedP99Ms} ms`]);
  }
  const b = r.busyAgents;
  if (b) {
    rows.push([
      `busy: ${b.agents} agents x ${b.handoffsPerAgent} at once`,
      `${b.totalSeconds} s total`,
      '',
      '',
      `overlaps ${b.overlappingTurns}, out of order ${b.agentsOutOfOrder}, not once ${b.handoffsNotWrittenOnce}`,
    ]);
  }
  const rr = r.roleRouting;
  if (rr) {
    rows.push([
      `role routing: ${rr.handoffs} to a role of ${rr.turnMs.length} (turns ${rr.turnMs[0]}-${rr.turnMs[rr.turnMs.length - 1]} ms)`,
      `${rr.role.seconds} s total`,
      '',
      '',
      `load ${rr.role.load.join('/')} (fair ${rr.fairShare.map((f) => Math.round(f)).join('/')})`,
    ]);
    rows.push([
      `role routing: the same round-robin at send time`,
      `${rr.roundRobin.seconds} s total`,
      '',
      '',
      `load ${rr.roundRobin.load.join('/')}`,
    ]);
  }
  if (r.recovery) {
    rows.push(['recovery: SIGKILL mid-write -> UNCERTAIN', `${r.recovery.killToUncertainSec} s`, '', '', '']);
    rows.push([`recovery: Redis wipe (${r.recovery.openAtWipe} open) -> all final`, `${r.recovery.wipeToFinalSec} s`, '', '', '']);
    rows.push(['recovery: Redis wipe -> longest stall in delivery', `${r.recovery.stallAfterWipeSec} s`, '', '', '']);
  }
  const s = r.startup;
  if (s) {
    for (const [label, t] of [
      ['API', s.api],
      ['worker', s.worker],
    ] as const)
      rows.push([
        `start: ${label} spawn -> ready (median of ${t.starts}; max)`,
        `${t.readyP50Sec} s`,
        '',
        '',
        `max ${t.readyMaxSec} s; CPU to ready ${t.cpuP50Ms ?? 'n/a'} ms`,
      ]);
  }
  const sections = [
    `Baton benchmark (${r.mode}${r.only ? `, only ${r.only.join(', ')}` : ''}), ${r.startedAt}, ${r.seconds} s; ${r.machine.cpus} cores, Node ${r.machine.node}, Postgres ${r.machine.postgres}${r.machine.embeddedPostgres ? ' (embedded)' : ''}, Redis ${r.machine.redis}${r.machine.embeddedRedis ? ' (private)' : ''}`,
  ];
  if (rows.length > 1) sections.push('', table(rows));
  if (delivery.length > 0) sections.push('', table(costTable(delivery, r.send)));
  if (r.longTurns) sections.push('', table(longTurnsTable(r.longTurns)));
  if (r.capacity) sections.push('', table(capacityTable(r.capacity)));
  const met = (m: boolean | null) => (m === null ? 'n/a' : m ? 'yes' : 'NO');
  if (r.targets.length > 0)
    sections.push(
      '',
      table([['target (issues 16, 36)', 'goal', 'measured', 'met'], ...r.targets.map((t) => [t.name, t.goal, t.measured, met(t.met)])]),
    );
  if (r.guarantees.length > 0)
    sections.push(
      '',
      table([['guarantee', 'goal', 'measured', 'met'], ...r.guarantees.map((g) => [g.name, g.goal, g.measured, met(g.met)])]),
    );
  return sections.join('\n');
}

function costTable(delivery: DeliveryRun[], send: SendResults | undefined): string[][] {
  const cost: string[][] = [['cost', ...delivery.map((d) => `${d.agents} agents`)]];
  cost.push(['API peak RSS (MiB)', ...delivery.map((d) => String(d.cost.apiRssMiB))]);
  cost.push(['worker peak RSS (MiB)', ...delivery.map((d) => d.cost.workerRssMiB.join(' / '))]);
  cost.push(['demo-host peak RSS (MiB)', ...delivery.map((d) => String(d.cost.demoHostRssMiB))]);
  cost.push(['Redis connections per worker', ...delivery.map((d) => d.cost.redisConnectionsPerWorker.join(' / '))]);
  cost.push(['Redis connections, API', ...delivery.map((d) => String(d.cost.redisConnectionsApi))]);
  cost.push([
    'Redis memory per queued handoff',
    ...delivery.map((d) =>
      d.cost.redisBytesPerQueuedHandoff === null ? 'n/a' : `${d.cost.redisBytesPerQueuedHandoff} bytes (${d.cost.queuedAtPeak} queued)`,
    ),
  ]);
  cost.push([
    'Postgres connections',
    ...delivery.map((d) =>
      Object.entries(d.cost.postgresConnections)
        .map(([k, v]) => `${k} ${v}`)
        .join(', '),
    ),
  ]);
  const per = (f: (d: DeliveryRun) => number | null) =>
    delivery.map((d) => {
      const v = f(d);
      return v === null ? 'n/a' : String(v);
    });
  cost.push(['CPU ms per handoff, all processes', ...per((d) => d.perHandoff.cpuMs.total)]);
  for (const role of ['postgres', 'workers', 'api', 'loadGenerator', 'demoHost', 'redis'] as const) {
    cost.push([`  of which ${ROLE_LABELS[role]}`, ...per((d) => d.perHandoff.cpuMs[role])]);
  }
  cost.push(['Postgres statements per handoff', ...per((d) => d.perHandoff.postgresStatements)]);
  cost.push(['Redis commands per handoff', ...per((d) => d.perHandoff.redisCommands)]);
  cost.push(['Postgres WAL bytes per handoff', ...per((d) => d.perHandoff.postgresWalBytes ?? null)]);
  cost.push(['other work on the host: CPU ms per handoff', ...per((d) => d.perHandoff.otherProcessesCpuMs ?? null)]);
  // What the processes' first handoffs cost (JIT compiling the hot path among it), measured apart.
  if (delivery.some((d) => d.warmUp)) {
    cost.push([
      'warm-up before: CPU ms per handoff',
      ...delivery.map((d) =>
        d.warmUp ? `${d.warmUp.perHandoff.cpuMs.total} (first ${d.warmUp.handoffs} handoffs of fresh processes)` : 'n/a',
      ),
    ]);
  }
  if (send) {
    cost.push([
      'Redis memory, nothing delivering',
      `${send.redisBytesPerQueuedHandoff} bytes per handoff, ${send.redisBytesPerWaitingAgent} per agent (${send.queuedHandoffs} handoffs to ${send.recipients} agents)`,
    ]);
  }
  return cost;
}

/** The long-turn scenario: capacity, time to all RETURNED, and the per-turn cost while waiting. */
function longTurnsTable(l: LongTurnsResult): string[][] {
  const na = (v: number | null, unit = '') => (v === null ? 'n/a' : `${v}${unit}`);
  const top = (lines: LongTurnsResult['redisTopCommands'], n: number, width: number) =>
    lines && lines.length > 0
      ? `; top: ${lines
          .slice(0, n)
          .map((x) => `${x.name.slice(0, width)} ${x.perSecPerTurn}`)
          .join(', ')}`
      : '';
  const rows: string[][] = [[`long turns: ${l.turns} agents, one ${l.turnSeconds} s turn each`, 'measured']];
  rows.push(['workers x shards x concurrency = job slots', `${l.workers} x ${l.queueShards} x ${l.workerConcurrency} = ${l.slots}`]);
  rows.push(['turns in flight at the peak (ACCEPTED + RUNNING)', String(l.peakInFlight)]);
  rows.push(['turns followed per worker', l.turnsPerWorker.join(' / ')]);
  rows.push(['first send -> last turn ACCEPTED', `${l.firstSendToLastAcceptedSec} s`]);
  rows.push(['last send -> all RETURNED', `${l.lastSendToAllReturnedSec} s`]);
  rows.push([
    'BullMQ active jobs per live turn',
    `${na(l.activeJobsPerLiveTurn)} (${l.queuedJobsInWindow} jobs or wake-ups waiting or delayed)`,
  ]);
  rows.push([
    'worker RSS per followed turn',
    `${na(l.workerRssKiBPerTurn, ' KiB')} (idle ${l.workerRssIdleMiB.join(' / ')} MiB, turns live ${l.workerRssLiveMiB.join(' / ')} MiB)`,
  ]);
  rows.push([
    'quiet window (nothing but waiting)',
    `${l.quietSeconds} s, ${l.liveInWindow} live turns, ${l.quietWindowClean ? 'no state changed' : 'STATES CHANGED'}`,
  ]);
  rows.push(['Redis commands /s per live turn', `${na(l.redisCommandsPerSecPerTurn)}${top(l.redisTopCommands, 6, 30)}`]);
  rows.push(['Postgres statements /s per live turn', `${na(l.postgresStatementsPerSecPerTurn)}${top(l.postgresTopStatements, 2, 48)}`]);
  rows.push(['CPU ms /s per live turn', `workers ${na(l.cpuMsPerSecPerTurn.workers)}, all processes ${l.cpuMsPerSecPerTurn.total}`]);
  const warnings = Object.entries(l.workerWarnings).sort((a, b) => b[1] - a[1]);
  rows.push(['worker warnings logged', warnings.length === 0 ? 'none' : warnings.map(([msg, n]) => `${msg} x${n}`).join('; ')]);
  rows.push(['written exactly once', `${l.turns - l.handoffsNotWrittenOnce} of ${l.turns}, ${l.writeViolations} write violations`]);
  return rows;
}

const scaleBand = (b: Band, k: number): Band => ({ low: b.low * k, mid: b.mid * k, high: b.high * k });
const bandText = (b: Band, digits = 0, unit = '') => `${round(b.low, digits)}-${round(b.high, digits)}${unit}`;

/** The capacity runs: measured throughput and Postgres load beside the model's predicted bands. */
function capacityTable(c: CapacityResult): string[][] {
  const cal = c.calibration.costs;
  const rows: string[][] = [
    [
      `capacity model (docs/CAPACITY.md), ${c.runs[0]?.agents ?? '?'} agents, calibrated on ${c.calibration.workers} worker${c.calibration.workers === 1 ? '' : 's'}`,
      'measured',
      'predicted band',
      'limited by',
      'within',
    ],
  ];
  const yes = (b: boolean | null) => (b === null ? 'n/a' : b ? 'yes' : 'NO');
  for (const run of c.runs) {
    const p = run.prediction;
    const n = `${run.workers} worker${run.workers === 1 ? '' : 's'}`;
    if (!p) {
      rows.push([`${n}: to RETURNED`, `${run.returnedPerSec}/s`, 'n/a (a shared Postgres or Redis: CPU unknown)', '', 'n/a']);
      continue;
    }
    const other = run.otherCores === null ? '' : ` (other work ${run.otherCores} cores)`;
    rows.push([
      `${n}: to RETURNED${other}`,
      `${run.returnedPerSec}/s`,
      bandText(p.handoffsPerSec, 0, '/s'),
      p.limitedBy,
      yes(run.withinBand.throughput),
    ]);
    rows.push([
      `${n}: Postgres cores busy`,
      run.postgres.cores === null ? 'n/a' : String(run.postgres.cores),
      bandText(p.postgres.cores, 2),
      '',
      yes(run.withinBand.postgres),
    ]);
    rows.push([
      `${n}: Postgres statements/s, WAL/s`,
      `${run.postgres.statementsPerSec ?? 'n/a'}, ${run.postgres.walBytesPerSec === null ? 'n/a' : `${round(run.postgres.walBytesPerSec / 1024 / 1024, 2)} MiB`}`,
      `${p.postgres.statementsPerSec ? bandText(p.postgres.statementsPerSec) : 'n/a'}, ${p.postgres.walBytesPerSec ? bandText(scaleBand(p.postgres.walBytesPerSec, 1 / 1024 / 1024), 2, ' MiB') : 'n/a'}`,
      '',
      '',
    ]);
  }
  if (!cal) return rows;
  rows.push([
    'calibration: CPU ms per handoff',
    `${round(
      Object.values(cal.cpuMs).reduce((a, b) => a + b, 0),
      3,
    )}`,
    `API ${cal.cpuMs.api}, workers ${cal.cpuMs.workers}, Postgres ${cal.cpuMs.postgres}, Redis ${cal.cpuMs.redis}, demo host ${cal.cpuMs.demoHost}, load generator ${cal.cpuMs.loadGenerator}`,
    '',
    '',
  ]);
  rows.push([
    'calibration: per handoff',
    '',
    `${cal.postgresStatements ?? 'n/a'} statements, ${cal.postgresWalBytes ?? 'n/a'} WAL bytes, ${cal.redisCommands ?? 'n/a'} Redis commands (${c.redisMsPerCommand ?? 'n/a'} ms each)`,
    '',
    '',
  ]);
  rows.push([
    'Redis memory per agent that had a turn (fence counter)',
    c.redisBytesPerAgent === null ? 'n/a' : `${c.redisBytesPerAgent} bytes`,
    '',
    '',
    '',
  ]);
  return rows;
}
