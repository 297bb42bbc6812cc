import { findWriteViolations, type DemoWrite } from '../../libs/adapters/demo/demo-agent-host.ts';
import { SETTLED_STATES, type DeliveryState } from '../../libs/domain/delivery-states.ts';
import { groupBy } from './group-by.ts';
import { n, row, type InvariantRow } from './invariant-row.ts';

export type { InvariantRow } from './invariant-row.ts';

/**
 * The chaos run's invariants, as pure functions over what the run recorded (the demo host's
 * write log, the sender's answers, the claimers' calls) and what Postgres holds at the end (the
 * handoffs, their attempts and the append-only event log). Each returns one table row: how many
 * violations it found, what it checked, and the first few violations spelled out. The checks of
 * the run as a whole (its processes, its time to settle) are in run-invariants.ts.
 */

export interface HandoffRow {
  readonly id: string;
  /** Send order (the `seq` column): one sender, one recipient at a time, so it is the order of the sends. */
  readonly seq: number;
  /** The recipient's handle; null for work sent to the project. */
  readonly recipient: string | null;
  readonly provider: string | null;
  readonly state: DeliveryState;
}

export interface AttemptRow {
  readonly handoffId: string;
  readonly requestId: string;
  /** When the attempt was reserved (SENDING), ms since the epoch: the reserving statement's own time, taken before it ran. */
  readonly reservedAt: number;
  /** When the transaction that reserved it committed (the run's trigger); absent: `reservedAt`. */
  readonly committedAt?: number;
  /** How the attempt ended (attempt_status): a turn that ended `failed` or `interrupted` may be resent. */
  readonly status: string;
}

export interface EventRow {
  /** The event log's id: its order within one handoff. */
  readonly id: number;
  readonly handoffId: string;
  readonly to: DeliveryState;
  readonly event: string;
  readonly actor: string | null;
  readonly workFrom: string | null;
  readonly workTo: string | null;
  /** The transition's own time, taken by the process before its statement ran. */
  readonly at: number;
  /**
   * When the transaction that wrote the event committed (the run's trigger): from then on other
   * statements see the state. It can be well after `at` when a connection is slow. Absent: `at`.
   */
  readonly committedAt?: number;
}

/** A value of `not_before` a handoff took, and when (the transition's time). */
export interface NotBeforeRow {
  readonly handoffId: string;
  readonly notBefore: number | null;
  readonly at: number;
}

/** One send as the sender saw it: the id and status of the answer that ended its retries. */
export interface SendRecord {
  readonly index: number;
  readonly to: string;
  /** 201 (created), 200 (a retry answered with the handoff the first try stored), or null: never answered. */
  readonly status: number | null;
  readonly id: string | null;
  /** Tries it took (1: answered at once). */
  readonly tries: number;
}

/** One call of a claimer on a claim, with when it was sent and answered (ms since the epoch). */
export interface ClaimCall {
  readonly agent: string;
  readonly handoffId: string;
  readonly op: 'accept' | 'heartbeat' | 'return';
  readonly sentAt: number;
  readonly answeredAt: number;
  /** The API said yes (and, for accept and return, not as a replay of an earlier yes). */
  readonly held: boolean;
}

/** Every handoff is in a settled state (libs/domain/delivery-states.ts SETTLED_STATES). */
export function checkAllFinal(handoffs: readonly HandoffRow[]): InvariantRow {
  const byState = new Map<string, number>();
  const open: string[] = [];
  for (const h of handoffs) {
    byState.set(h.state, (byState.get(h.state) ?? 0) + 1);
    if (!SETTLED_STATES.has(h.state)) open.push(`${h.id} to ${h.recipient ?? '@project'} is ${h.state}`);
  }
  const states = [...byState]
    .sort((a, b) => b[1] - a[1])
    .map(([s, c]) => `${s} ${n(c)}`)
    .join(', ');
  return row('every handoff in a final state', open, `${n(handoffs.length)} handoffs: ${states || 'none'}`);
}

/** No request id reached a session twice (a resend Baton must never make). */
export function checkRequestIdsOnce(writes: readonly DemoWrite[]): InvariantRow {
  const repeated = findWriteViolations(writes).filter((v) => v.kind === 'repeated_request_id');
  const ids = new Set(writes.map((w) => w.requestId)).size;
  return row(
    'no request id written twice',
    repeated.map((v) =>
      v.kind === 'repeated_request_id' ? `request ${v.requestId} (handoff ${v.writes[0]?.handoffId}) written ${v.writes.length} times` : '',
    ),
    `${n(writes.length)} writes of ${n(ids)} request ids (demo host write log)`,
  );
}

/** No write reached a session while another of its turns was live. */
export function checkNoOverlap(writes: readonly DemoWrite[]): InvariantRow {
  const overlaps = findWriteViolations(writes).filter((v) => v.kind === 'overlap');
  const sessions = new Set(writes.map((w) => w.session)).size;
  const landed = writes.filter((w) => w.answer === 'accepted').length;
  return row(
    'no two turns of one agent overlapping',
    overlaps.map((v) =>
      v.kind === 'overlap' ? `${v.write.session}: request ${v.write.requestId} arrived while ${v.write.liveTurn} was live` : '',
    ),
    `${n(writes.length)} writes (${n(landed)} turns) to ${n(sessions)} sessions`,
  );
}

/**
 * What Postgres says each push handoff ended as agrees with what its session saw: a RETURNED
 * handoff's turn landed, a CANCELLED one's never did (Baton cancels an UNCERTAIN delivery only
 * once history scans proved its write absent), and a handoff landed more than once only when an
 * earlier turn of it ended failed or interrupted (the bounded resends, each under a new request
 * id): otherwise it is one turn per handoff.
 */
export function checkOutcomesMatchSessions(
  handoffs: readonly HandoffRow[],
  writes: readonly DemoWrite[],
  attempts: readonly AttemptRow[],
): InvariantRow {
  const landed = new Map<string, number>();
  for (const w of writes) if (w.answer === 'accepted') landed.set(w.handoffId, (landed.get(w.handoffId) ?? 0) + 1);
  const resent = new Map<string, number>();
  for (const a of attempts)
    if (a.status === 'failed' || a.status === 'interrupted') resent.set(a.handoffId, (resent.get(a.handoffId) ?? 0) + 1);
  const problems: string[] = [];
  let once = 0;
  let more = 0;
  const never = new Map<string, number>();
  const push = handoffs.filter((h) => h.provider === 'demo');
  for (const h of push) {
    const n = landed.get(h.id) ?? 0;
    if (n === 1) once++;
    else if (n > 1) more++;
    else never.set(h.state, (never.get(h.state) ?? 0) + 1);
    if (h.state === 'RETURNED' && n === 0) problems.push(`${h.id} to ${h.recipient} is RETURNED but no turn of it reached the session`);
    if (h.state === 'CANCELLED' && n > 0)
      problems.push(`${h.id} to ${h.recipient} is CANCELLED (proven absent) but its turn reached the session ${n} time(s)`);
    if (n > 1 + (resent.get(h.id) ?? 0))
      problems.push(`${h.id} to ${h.recipient} reached the session ${n} times with ${resent.get(h.id) ?? 0} resend(s) allowed`);
  }
  const neverText = [...never].map(([state, c]) => `${state} ${n(c)}`).join(', ');
  return row(
    'each push handoff written once, as its state says',
    problems,
    `${n(push.length)} push handoffs: ${n(once)} landed once, ${n(more)} more than once, ${n(push.length - once - more)} never${neverText ? ` (${neverText})` : ''}`,
  );
}

/**
 * Every send the API answered with a handoff (201, or 200 for a retry of a send that had been
 * stored) exists at the end and is final; and every send was answered (a send is retried with
 * its idempotency key until it is).
 */
export function checkSendsKept(sends: readonly SendRecord[], handoffs: readonly HandoffRow[]): InvariantRow {
  const byId = new Map(handoffs.map((h) => [h.id, h]));
  const problems: string[] = [];
  let created = 0;
  let replayed = 0;
  let retried = 0;
  for (const s of sends) {
    if (s.tries > 1) retried++;
    if (s.id === null || s.status === null) {
      problems.push(`send #${s.index} to ${s.to} was never answered with a handoff`);
      continue;
    }
    if (s.status === 201) created++;
    else replayed++;
    const h = byId.get(s.id);
    if (!h) problems.push(`send #${s.index} to ${s.to} was answered ${s.status} with ${s.id}, which does not exist`);
    else if (!SETTLED_STATES.has(h.state)) problems.push(`send #${s.index} to ${s.to} (${s.id}) is ${h.state}, not final`);
  }
  const ids = new Set(sends.map((s) => s.id).filter((id) => id !== null));
  if (ids.size !== sends.filter((s) => s.id !== null).length) problems.push('two sends were answered with the same handoff');
  return row(
    'no send answered 201 lost',
    problems,
    `${n(sends.length)} sends: ${n(created)} answered 201, ${n(replayed)} answered 200 for a retry with the same key (${n(retried)} retried); each exists and is final`,
  );
}

interface ClaimSpan {
  readonly agent: string;
  readonly from: number;
  to: number;
}

/**
 * No work item was ever held by two agents at once, read two ways. From the event log: replaying
 * each item's work moves in order, a claim never starts while another is held. From the
 * claimers' side: a call that the API answered as the holder's (a claim, a heartbeat, a return)
 * never falls wholly inside a span in which the log says another agent held the claim.
 */
export function checkClaims(events: readonly EventRow[], calls: readonly ClaimCall[], endAt: number): InvariantRow {
  const problems: string[] = [];
  const spans = new Map<string, ClaimSpan[]>();
  let claims = 0;
  for (const [id, list] of groupBy(
    events.filter((e) => e.workTo !== null),
    (e) => e.handoffId,
  )) {
    let holder: ClaimSpan | null = null;
    for (const e of [...list].sort((a, b) => a.id - b.id)) {
      if (e.workTo === 'claimed') {
        claims++;
        if (holder) problems.push(`${id}: claimed by ${e.actor} at ${new Date(e.at).toISOString()} while ${holder.agent} held it`);
        else if (e.workFrom !== 'open') problems.push(`${id}: claimed by ${e.actor} from ${e.workFrom}`);
        holder = { agent: e.actor ?? '?', from: e.at, to: endAt };
        spans.set(id, [...(spans.get(id) ?? []), holder]);
      } else if (holder && e.workFrom === 'claimed') {
        holder.to = e.at;
        holder = null;
      }
    }
  }
  let crossChecked = 0;
  for (const c of calls) {
    if (!c.held) continue;
    crossChecked++;
    const other = (spans.get(c.handoffId) ?? []).find((s) => s.agent !== c.agent && s.from <= c.sentAt && c.answeredAt <= s.to);
    if (other) problems.push(`${c.handoffId}: ${c.agent}'s ${c.op} succeeded while ${other.agent} held the claim`);
  }
  return row(
    'no claim held by two agents',
    problems,
    `${n(spans.size)} work items, ${n(claims)} claims in the event log; ${n(crossChecked)} successful claimer calls cross-checked`,
  );
}
