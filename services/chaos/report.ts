import { FAULT_KINDS, FAULT_LABELS, type FaultKind, type FaultRecord } from './faults.ts';
import type { UnexpectedExit } from './chaos-environment.ts';
import type { InvariantRow } from './invariant-row.ts';
import { renderUncertain, type UncertainSummary } from './uncertain-summary.ts';

/** One kind of fault as the report shows it: how often, and the range of what it did. */
export interface FaultSummary {
  readonly kind: FaultKind;
  readonly label: string;
  readonly count: number;
  readonly detail: string;
}

export interface ChaosResult {
  readonly version: 1;
  readonly ok: boolean;
  readonly startedAt: string;
  readonly seed: number;
  readonly options: {
    agents: number;
    manualAgents: number;
    handoffs: number;
    apis: number;
    workers: number;
    durationSec: number;
    deadlineSec: number;
    starved: number;
  };
  /** `--starved`: the busy processes that spun beside Baton, on how many CPUs, for how long; null without it. */
  readonly starvation: { busyProcesses: number; cpus: number; seconds: number } | null;
  /** The highest 1-minute load average seen during the chaos (sampled every 5 s). */
  readonly maxLoadAverage: number;
  readonly seconds: { setup: number; chaos: number; lastFaultToFinal: number | null; total: number };
  readonly traffic: {
    sends: number;
    answered: number;
    sendRetries: number;
    writes: number;
    turnsLanded: number;
    workerProcessesStarted: number;
    claims: { claims: number; heartbeats: number; returns: number; abandoned: number; lost: number; packets: number };
    /** Handoffs read (GET /v1/handoffs/:id) during the faults: answered 200, 5xx, or not at all. */
    reads: { reads: number; ok: number; unavailable: number; unanswered: number };
  };
  readonly faults: readonly FaultSummary[];
  /** Processes that exited although the run did not stop them (each was restarted, as a supervisor would). */
  readonly unexpectedExits: readonly UnexpectedExit[];
  readonly invariants: readonly InvariantRow[];
  /** The handoffs that went UNCERTAIN, and what became of those never written to a session. */
  readonly uncertain: UncertainSummary;
  /** Where the processes' logs were kept (a failed run, or --keep-logs). */
  readonly logs: string | null;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const range = (values: readonly number[], fmt: (v: number) => string) => {
  if (values.length === 0) return '';
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  return lo === hi ? fmt(lo) : `${fmt(lo)}–${fmt(hi)}`;
};

/** Per kind: the count, and what the faults of that kind did (targets, durations, modes). */
export function summarizeFaults(records: readonly FaultRecord[]): FaultSummary[] {
  return FAULT_KINDS.map((kind) => {
    const of = records.filter((r) => r.kind === kind);
    const onServer = (s: string) => of.filter((r) => r.server === s).length;
    let detail: string;
    switch (kind) {
      case 'worker_kill':
      case 'api_kill': {
        const killed = of.reduce((s, r) => s + r.targets.length, 0);
        detail = of.length
          ? `${killed} processes killed, each restarted ${range(
              of.map((r) => Number(/after (\d+) ms/.exec(r.detail)?.[1] ?? 0)),
              seconds,
            )} later and serving ${range(
              of.map((r) => r.durationMs),
              seconds,
            )} after the kill`
          : '';
        break;
      }
      case 'redis_restart':
        detail = of.length
          ? `down ${range(
              of.map((r) => r.durationMs),
              seconds,
            )} (all state lost: no persistence)`
          : '';
        break;
      case 'postgres_restart': {
        const fast = of.filter((r) => r.detail === 'fast').length;
        detail = of.length
          ? `${fast} fast, ${of.length - fast} immediate (crash recovery); down ${range(
              of.map((r) => r.durationMs),
              seconds,
            )}`
          : '';
        break;
      }
      case 'proxy_latency':
        detail = of.length
          ? `+${range(
              of.map((r) => Number(r.detail.split('+')[0])),
              (v) => `${v}`,
            )} ms (+ jitter) for ${range(
              of.map((r) => r.durationMs),
              seconds,
            )}; postgres ${onServer('postgres')}, redis ${onServer('redis')}, both ${of.filter((r) => r.server === null).length}`
          : '';
        break;
      case 'proxy_stall':
        detail = of.length
          ? `${range(
              of.map((r) => r.durationMs),
              seconds,
            )}; postgres ${onServer('postgres')}, redis ${onServer('redis')}`
          : '';
        break;
      case 'proxy_drop': {
        const broken = of.reduce((s, r) => s + Number(/^(\d+)/.exec(r.detail)?.[1] ?? 0), 0);
        detail = of.length ? `${broken} connections broken; postgres ${onServer('postgres')}, redis ${onServer('redis')}` : '';
        break;
      }
      default: {
        const never: never = kind;
        throw new Error(`unknown fault ${String(never)}`);
      }
    }
    return { kind, label: FAULT_LABELS[kind], count: of.length, detail };
  });
}

function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>, rightAligned: ReadonlySet<number>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : rightAligned.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** The human report: the run, what was injected, and the invariants table with its verdict. */
export function renderChaosReport(r: ChaosResult): string {
  const o = r.options;
  const t = r.traffic;
  const head = [
    `Baton chaos run, ${r.startedAt} (seed ${r.seed})`,
    `${o.apis} API and ${o.workers} worker processes (${t.workerProcessesStarted} worker processes started in all), ${o.agents} demo agents, ${o.manualAgents} manual agents with claimer loops`,
    `${t.sends} handoffs sent (${t.answered} answered, ${t.sendRetries} sends retried), ${t.writes} writes to sessions (${t.turnsLanded} turns landed); claims: ${t.claims.claims} claimed, ${t.claims.heartbeats} heartbeats, ${t.claims.returns} returned, ${t.claims.abandoned} abandoned, ${t.claims.lost} lost, ${t.claims.packets} work packets read`,
    `${t.reads.reads} handoffs read during the faults: ${t.reads.ok} answered 200, ${t.reads.unavailable} 5xx, ${t.reads.unanswered} not answered`,
    `set-up ${r.seconds.setup} s, chaos ${r.seconds.chaos} s, last fault to all final ${r.seconds.lastFaultToFinal === null ? 'not reached' : `${r.seconds.lastFaultToFinal} s`}, total ${r.seconds.total} s`,
    r.starvation
      ? `starved: ${r.starvation.busyProcesses} busy processes on ${r.starvation.cpus} CPUs for ${r.starvation.seconds} s; load average up to ${r.maxLoadAverage}`
      : `not starved; load average up to ${r.maxLoadAverage}`,
  ].join('\n');
  const exits = new Map<string, number>();
  for (const e of r.unexpectedExits) {
    const key = `${e.slot.replace(/-\d+$/, '')} ${e.wasServing ? 'while serving' : 'at start-up'} (exit ${e.code ?? e.signal}): ${e.reason}`;
    exits.set(key, (exits.get(key) ?? 0) + 1);
  }
  const exitLines = [...exits].map(([what, count]) => `  ${count} x ${what}`);
  const faults = table(
    ['fault', 'count', 'what'],
    r.faults.map((f) => [f.label, String(f.count), f.detail]),
    new Set([1]),
  );
  const invariants = table(
    ['invariant', 'violations', 'checked'],
    r.invariants.map((i) => [i.name, String(i.violations), i.checked]),
    new Set([1]),
  );
  const details = r.invariants
    .filter((i) => i.violations > 0)
    .map(
      (i) =>
        `${i.name}:\n${i.details.map((d) => `  - ${d}`).join('\n')}${i.violations > i.details.length ? `\n  … ${i.violations - i.details.length} more` : ''}`,
    );
  const broken = r.invariants.filter((i) => i.violations > 0).length;
  const missing = r.faults.filter((f) => f.count === 0).map((f) => f.label);
  const verdict = r.ok
    ? 'PASS: every invariant held, under every kind of fault'
    : `FAIL: ${[broken > 0 ? `${broken} invariant(s) broken` : '', missing.length > 0 ? `never injected: ${missing.join(', ')}` : ''].filter(Boolean).join('; ')}`;
  const exited =
    r.unexpectedExits.length === 0
      ? ['processes that exited by themselves: none']
      : [
          `processes that exited by themselves (an API or a worker is restarted 0.5 s later, as a supervisor would; each exit fails the run): ${r.unexpectedExits.length}`,
          ...exitLines,
        ];
  return [
    head,
    '',
    faults,
    '',
    ...exited,
    '',
    invariants,
    ...(details.length ? ['', ...details] : []),
    '',
    ...renderUncertain(r.uncertain),
    '',
    verdict,
    ...(r.logs ? [`process logs: ${r.logs}`] : []),
  ].join('\n');
}
