import { handoffUsageLines, type AttemptUsageJson, type UsageTotalsJson } from './usage-format.ts';
/**
 * Plain-text renderings for the terminal. `--json` prints the API's JSON instead (times in it
 * stay ISO 8601). Times for people have one format: local time, `YYYY-MM-DD HH:MM:SS`
 * (`localTime`), and, where an age reads better (tables, due times, leases), relative:
 * "3 min ago", "in 5 min" (`relativeTime`).
 */
import { FENCE } from '../../libs/domain/context-packet.ts';
import { renderTable, type Column } from './table.ts';

export interface HandoffJson {
  id: string;
  from: string;
  to: string | null;
  /** The role it was sent to (`@role:<name>`); `to` stays null until it is bound. */
  toRole?: string | null;
  title: string | null;
  message: string;
  state: string;
  workState?: string | null;
  work?: {
    state: string;
    attempt: number;
    revision: number;
    claimedBy: string | null;
    leaseExpiresAt: string | null;
    returnOutcome?: string | null;
    resolution: string | null;
    note: string | null;
  } | null;
  detail: string | null;
  attemptCount: number;
  dueAt: string | null;
  result: { summary: string | null } | null;
  createdAt: string;
  attempts?: Array<{ number: number; requestId: string; status: string; error: string | null }>;
  usage?: { attempts: AttemptUsageJson[]; total: UsageTotalsJson };
  events?: Array<{
    from: string | null;
    to: string;
    workFrom?: string | null;
    workTo?: string | null;
    event: string;
    actor: { kind: string; id: string | null };
    reason: string | null;
    at: string;
  }>;
}

const two = (n: number) => String(n).padStart(2, '0');

/** An ISO time as local time for people: `2026-12-02 14:05:09`. */
export function localTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/**
 * How long ago (or how far ahead) an ISO time is: "just now", "12 s ago", "3 min ago",
 * "2 h ago", "4 days ago", "in 5 min"; past a week, the local date.
 */
export function relativeTime(iso: string, now: number = Date.now()): string {
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return iso;
  const s = Math.round((now - at) / 1000);
  const size = Math.abs(s);
  if (size < 2) return 'just now';
  if (size >= 7 * 86_400) return localTime(iso).slice(0, 10);
  const amount =
    size < 60
      ? `${size} s`
      : size < 3600
        ? `${Math.floor(size / 60)} min`
        : size < 86_400
          ? `${Math.floor(size / 3600)} h`
          : `${Math.floor(size / 86_400)} day${size < 2 * 86_400 ? '' : 's'}`;
  return s > 0 ? `${amount} ago` : `in ${amount}`;
}

/** Both: `2026-12-02 14:05:09 (3 min ago)`, for a time in a detail view. */
export const timeText = (iso: string, now?: number) => `${localTime(iso)} (${relativeTime(iso, now)})`;

/** What a row of handoffs shows: a listed handoff, or one as a session lists it (no message). */
export type HandoffRow = Pick<HandoffJson, 'id' | 'from' | 'to' | 'toRole' | 'title' | 'state' | 'workState' | 'createdAt'> & {
  message?: string;
};

/** Whom it is to: the agent, a role not bound yet (`@role:<name>`), or the project. */
const toOf = (h: HandoffRow, project: string) => h.to ?? (h.toRole ? `@role:${h.toRole}` : project);
const stateOf = (h: HandoffRow) => (h.workState ? `${h.state}/${h.workState}` : h.state);
const labelOf = (h: HandoffRow) => h.title ?? h.message?.split('\n')[0] ?? '';

/** One handoff on one line, after a verb: `sent: <id>  STATE  from -> to  title`. */
export function handoffLine(h: HandoffJson): string {
  const label = labelOf(h);
  return `${h.id}  ${stateOf(h).padEnd(20)} ${h.from} -> ${toOf(h, '(project)')}  ${label.length > 60 ? `${label.slice(0, 57)}...` : label}`;
}

const HANDOFF_COLUMNS: readonly Column<HandoffRow>[] = [
  { header: 'ID', value: (h) => h.id },
  { header: 'STATE', value: stateOf },
  { header: 'FROM', value: (h) => h.from, max: 24 },
  { header: 'TO', value: (h) => toOf(h, '(project)'), max: 24 },
  { header: 'SENT', value: (h) => relativeTime(h.createdAt) },
  { header: 'TITLE', value: labelOf, max: 60 },
];

/** Handoffs as a table with headers (`list`, `inbox`, `outbox`, `session show`). */
export const handoffTable = (items: readonly HandoffRow[], colour: boolean) => renderTable(HANDOFF_COLUMNS, items, { colour });

/**
 * Where a handoff stands and what came of it: its delivery state, its work, the result's
 * summary. `show` prints it inside the detail; `send --wait` prints it once the handoff settles.
 */
export function outcomeLines(h: HandoffJson): string[] {
  const lines = [`  state    ${h.state}${h.detail ? ` (${h.detail})` : ''}`];
  if (h.work) {
    const w = h.work;
    const returned = w.returnOutcome ? (w.state === 'returned' ? ` (${w.returnOutcome})` : `, last return ${w.returnOutcome}`) : '';
    lines.push(
      `  work     ${w.state}${returned}${w.attempt > 0 ? `, claim ${w.attempt}` : ''}${w.claimedBy ? `, claimed by ${w.claimedBy}` : ''}` +
        `${w.resolution ? `, closed ${w.resolution}` : ''}${w.note ? ` (note: ${w.note})` : ''}`,
    );
  }
  if (h.result?.summary) lines.push(`  result   ${h.result.summary}`);
  return lines;
}

export function handoffDetail(h: HandoffJson): string {
  const lines = [
    `handoff ${h.id}`,
    `  from ${h.from} to ${toOf(h, '(anyone in the project)')}${h.to && h.toRole ? ` (role ${h.toRole})` : ''}, sent ${timeText(h.createdAt)}`,
  ];
  lines.push(...outcomeLines(h));
  if (h.title) lines.push(`  title    ${h.title}`);
  lines.push(`  message  ${h.message.length > 200 ? `${h.message.slice(0, 197)}...` : h.message}`);
  if (h.dueAt) lines.push(`  due      ${timeText(h.dueAt)}`);
  if (h.attempts && h.attempts.length > 0) {
    lines.push('  attempts');
    for (const a of h.attempts)
      lines.push(`    #${a.number} ${a.status.padEnd(11)} request ${a.requestId}${a.error ? `  ${a.error}` : ''}`);
  }
  lines.push(...handoffUsageLines(h.usage));
  if (h.events && h.events.length > 0) {
    lines.push('  timeline');
    for (const e of h.events) {
      const who = e.actor.id ? `${e.actor.kind}:${e.actor.id}` : e.actor.kind;
      const move = e.workTo
        ? `work ${(e.workFrom ?? '-').padEnd(9)} -> ${e.workTo.padEnd(9)}`
        : `${(e.from ?? '-').padEnd(14)} -> ${e.to.padEnd(14)}`;
      lines.push(`    ${localTime(e.at)}  ${move} ${e.event} by ${who}${e.reason ? ` (${e.reason})` : ''}`);
    }
  }
  return lines.join('\n');
}

/**
 * A context packet as `read` and `accept` print it, or null when it says nothing beyond the
 * handoff itself: nothing between its fences and no note after them (the detail or claim line
 * above already names the handoff, its title and sender), so no empty fenced block is printed.
 */
export function packetText(text: string): string | null {
  const lines = text.split('\n');
  const open = lines.indexOf(FENCE);
  const close = lines.lastIndexOf(FENCE);
  // What is fenced, and any note after the closing fence (facts left out).
  const said = open >= 0 && close > open ? [...lines.slice(open + 1, close), ...lines.slice(close + 1)] : lines;
  return said.some((l) => l.trim() !== '') ? text : null;
}
