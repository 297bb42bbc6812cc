/** Plain-text renderings for the terminal. `--json` prints the API's JSON instead. */

export interface HandoffJson {
  id: string;
  from: string;
  to: string | null;
  title: string | null;
  message: string;
  state: string;
  workState?: string | null;
  work?: { state: string; attempt: number; revision: number; claimedBy: string | null; leaseExpiresAt: string | null; resolution: string | null; note: string | null } | null;
  detail: string | null;
  attemptCount: number;
  dueAt: string | null;
  result: { summary: string | null } | null;
  createdAt: string;
  attempts?: Array<{ number: number; requestId: string; status: string; error: string | null }>;
  events?: Array<{ from: string | null; to: string; workFrom?: string | null; workTo?: string | null; event: string; actor: { kind: string; id: string | null }; reason: string | null; at: string }>;
}

const time = (iso: string) => iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');

export function handoffLine(h: HandoffJson): string {
  const label = h.title ?? h.message.split('\n')[0] ?? '';
  const state = h.workState ? `${h.state}/${h.workState}` : h.state;
  return `${h.id}  ${state.padEnd(20)} ${h.from} -> ${h.to ?? '(project)'}  ${label.length > 60 ? `${label.slice(0, 57)}...` : label}`;
}

export function handoffDetail(h: HandoffJson): string {
  const lines = [
    `handoff ${h.id}`,
    `  from ${h.from} to ${h.to ?? '(anyone in the project)'}, sent ${time(h.createdAt)}`,
    `  state    ${h.state}${h.detail ? ` (${h.detail})` : ''}`,
  ];
  if (h.work) {
    lines.push(
      `  work     ${h.work.state}${h.work.attempt > 0 ? `, claim ${h.work.attempt}` : ''}${h.work.claimedBy ? `, claimed by ${h.work.claimedBy}` : ''}${h.work.resolution ? `, closed ${h.work.resolution}` : ''}${h.work.note ? ` (note: ${h.work.note})` : ''}`,
    );
  }
  if (h.title) lines.push(`  title    ${h.title}`);
  lines.push(`  message  ${h.message.length > 200 ? `${h.message.slice(0, 197)}...` : h.message}`);
  if (h.dueAt) lines.push(`  due      ${time(h.dueAt)}`);
  if (h.result?.summary) lines.push(`  result   ${h.result.summary}`);
  if (h.attempts && h.attempts.length > 0) {
    lines.push('  attempts');
    for (const a of h.attempts) lines.push(`    #${a.number} ${a.status.padEnd(11)} request ${a.requestId}${a.error ? `  ${a.error}` : ''}`);
  }
  if (h.events && h.events.length > 0) {
    lines.push('  timeline');
    for (const e of h.events) {
      const who = e.actor.id ? `${e.actor.kind}:${e.actor.id}` : e.actor.kind;
      const move = e.workTo ? `work ${(e.workFrom ?? '-').padEnd(9)} -> ${e.workTo.padEnd(9)}` : `${(e.from ?? '-').padEnd(14)} -> ${e.to.padEnd(14)}`;
      lines.push(`    ${time(e.at)}  ${move} ${e.event} by ${who}${e.reason ? ` (${e.reason})` : ''}`);
    }
  }
  return lines.join('\n');
}
