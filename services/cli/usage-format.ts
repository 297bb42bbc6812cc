import { renderTable, type Column } from './table.ts';

/** Turn accounting as the CLI prints it: `show`'s usage lines and `baton usage`'s table (GET /v1/usage). */

/** The sums of several turns, as the API answers them. */
export interface UsageTotalsJson {
  turns: number;
  turnSeconds: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number | null;
}

export interface AttemptUsageJson {
  number: number;
  model: string | null;
  turnSeconds: number | null;
  inputTokens: number | null;
  outputTokens: number | null;
  cacheReadTokens: number | null;
  cacheWriteTokens: number | null;
  costUsd: number | null;
}

export interface UsageReportJson {
  project: string;
  agent: string | null;
  since: string;
  until: string;
  rows: Array<UsageTotalsJson & { agent: string; provider: string; model: string | null }>;
  total: UsageTotalsJson;
}

const count = (n: number | null) => (n === null ? '-' : n.toLocaleString('en-US'));
const cost = (usd: number | null) => (usd === null ? '-' : `$${usd.toFixed(usd < 1 ? 4 : 2)}`);
const seconds = (s: number | null) => (s === null ? '-' : `${s.toFixed(1)}s`);

/** One line of what a turn (or several) used: time, tokens by kind, cost, model. */
export function usageText(u: Omit<AttemptUsageJson, 'number' | 'model'> & { model?: string | null }): string {
  const parts = [
    seconds(u.turnSeconds),
    `in ${count(u.inputTokens)}`,
    `out ${count(u.outputTokens)}`,
    `cache read ${count(u.cacheReadTokens)}`,
    `cache write ${count(u.cacheWriteTokens)}`,
    cost(u.costUsd),
  ];
  if (u.model) parts.push(u.model);
  return parts.join(', ');
}

/** `show`'s usage lines: each attempt that ran, and the total when there are several. */
export function handoffUsageLines(usage: { attempts: AttemptUsageJson[]; total: UsageTotalsJson } | undefined): string[] {
  if (!usage) return [];
  const ran = usage.attempts.filter((a) => a.turnSeconds !== null || a.inputTokens !== null || a.costUsd !== null);
  if (ran.length === 0) return [];
  const lines = ['  usage'];
  for (const a of ran) lines.push(`    #${a.number} ${usageText(a)}`);
  if (ran.length > 1) lines.push(`    total ${usageText(usage.total)}`);
  return lines;
}

type Row = UsageReportJson['rows'][number];
const COLUMNS: readonly Column<Row>[] = [
  { header: 'AGENT', value: (r) => r.agent },
  { header: 'PROVIDER', value: (r) => r.provider },
  { header: 'MODEL', value: (r) => r.model ?? '-', max: 32 },
  { header: 'TURNS', value: (r) => count(r.turns), align: 'right' },
  { header: 'TIME', value: (r) => seconds(r.turnSeconds), align: 'right' },
  { header: 'INPUT', value: (r) => count(r.inputTokens), align: 'right' },
  { header: 'OUTPUT', value: (r) => count(r.outputTokens), align: 'right' },
  { header: 'CACHE READ', value: (r) => count(r.cacheReadTokens), align: 'right' },
  { header: 'CACHE WRITE', value: (r) => count(r.cacheWriteTokens), align: 'right' },
  { header: 'COST', value: (r) => cost(r.costUsd), align: 'right' },
];

/** `baton usage`: a row per agent and model, then the total. */
export function usageTable(report: UsageReportJson, colour: boolean): string[] {
  const total: Row = { ...report.total, agent: 'total', provider: '', model: null };
  return renderTable(COLUMNS, report.rows.length > 1 ? [...report.rows, total] : report.rows, { colour });
}
