import { findWriteViolations, type DemoWrite } from '../../libs/adapters/demo/demo-agent-host.ts';
import { DISPATCHABLE_STATES, SETTLED_STATES, type DeliveryState } from '../../libs/domain/delivery-states.ts';
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

export interface OrderOptions {
  /**
   * The longest time between a worker reading an agent's head of queue (`nextWork`, at its
   * clock's `now`) and reserving the attempt it chose (the attempt's `started_at`). A head
   * whose back-off (`not_before`) ended within this long before the overtaking reservation may
   * still have been "not due" when the head was read.
   */
  readonly headReadToReserveMs: number;
}

/** Why an overtake is what Baton promises: the head was not dispatchable when the later one was chosen. */
type Excuse = 'head UNCERTAIN' | 'head HELD' | 'head not due (back-off)' | 'head not yet committed';

/**
 * Per-agent order, exactly as `dispatchAgent` (libs/handoffs/dispatch-agent.ts) and
 * `HandoffRepository.nextWork` promise it: the worker holding an agent's turn lock writes the
 * oldest handoff (send order) that may start an attempt now. A later handoff B may therefore be
 * written before an earlier A only if, when B was chosen, A could not start one: A was
 * UNCERTAIN (an attempt that may have landed is never resent, and does not block the queue: it
 * is settled by history scans or, when its writer proves it never wrote it, sent again later),
 * HELD, or backing off (`not_before` in the future: a busy session, a failed send). Any other
 * overtake is a violation.
 *
 * "When B was chosen" is a snapshot somewhere between the head read (at most
 * `headReadToReserveMs` before B's reservation time `tB`, which is taken before the reserving
 * statement runs) and the commit of B's reservation. What that snapshot saw of A is decided by
 * commits, not by the transitions' own times: a transition stamped before `tB` on a slow
 * connection may commit after B was chosen. So A's possible states are the one committed last
 * before the window and every one committed inside it; the overtake is allowed when one of them
 * excuses it. The window starts no earlier than the commit of the state B was reserved from
 * (the snapshot that chose B saw it).
 */
export function checkAgentOrder(
  handoffs: readonly HandoffRow[],
  writes: readonly DemoWrite[],
  attempts: readonly AttemptRow[],
  events: readonly EventRow[],
  notBefore: readonly NotBeforeRow[],
  opts: OrderOptions,
): InvariantRow {
  const firstWrite = new Map<string, { at: number; requestId: string }>();
  writes.forEach((w, at) => {
    if (!firstWrite.has(w.handoffId)) firstWrite.set(w.handoffId, { at, requestId: w.requestId });
  });
  const attemptOf = new Map(attempts.map((a) => [a.requestId, a]));
  const eventsOf = groupBy(
    [...events].sort((a, b) => a.id - b.id),
    (e) => e.handoffId,
  );
  const notBeforeOf = groupBy(notBefore, (r) => r.handoffId);
  const byAgent = groupBy(
    handoffs.filter((h) => h.recipient !== null && firstWrite.has(h.id)),
    (h) => h.recipient!,
  );
  const problems: string[] = [];
  const excused = new Map<Excuse, number>();
  let pairs = 0;
  for (const [agent, list] of byAgent) {
    const sorted = [...list].sort((a, b) => a.seq - b.seq);
    for (let i = 0; i < sorted.length; i++) {
      for (let j = i + 1; j < sorted.length; j++) {
        pairs++;
        const a = sorted[i]!;
        const b = sorted[j]!;
        const wa = firstWrite.get(a.id)!;
        const wb = firstWrite.get(b.id)!;
        if (wb.at > wa.at) continue;
        const attemptB = attemptOf.get(wb.requestId);
        if (attemptB === undefined) {
          problems.push(`${agent}: ${b.id} (sent after ${a.id}) was written first by request ${wb.requestId}, which no attempt reserved`);
          continue;
        }
        const window = choiceWindow(eventsOf.get(b.id) ?? [], attemptB, opts);
        const seen = statesSeen(eventsOf.get(a.id) ?? [], window);
        const excuse = headExcuse(seen, notBeforeOf.get(a.id) ?? [], window, opts);
        if (excuse) {
          excused.set(excuse, (excused.get(excuse) ?? 0) + 1);
          continue;
        }
        problems.push(
          `${agent}: ${b.id} (sent after ${a.id}) was written first; ${a.id} was ${seen.map((s) => s ?? 'not yet sent').join(' or ')} when it was reserved at ${new Date(attemptB.reservedAt).toISOString()}`,
        );
      }
    }
  }
  const allowed = [...excused].map(([why, c]) => `${why} ${n(c)}`).join(', ');
  const timed = events.filter((e) => e.committedAt !== undefined);
  const late = timed.filter((e) => e.committedAt! - e.at >= LATE_COMMIT_MS).length;
  return row(
    'per-agent order kept',
    problems,
    `${n(pairs)} pairs of written handoffs to ${n(byAgent.size)} agents; overtakes Baton allows: ${allowed || 'none'}; ` +
      `${n(timed.length)} of ${n(events.length)} events with a commit time, ${n(late)} committed ${LATE_COMMIT_MS} ms or more after their own`,
  );
}

/** A commit this long after the transition's own time is counted as late in the order row. */
const LATE_COMMIT_MS = 50;

interface ChoiceWindow {
  /** The earliest the head could have been read. */
  readonly from: number;
  /** B's reservation time. */
  readonly tB: number;
  /** When B's reservation committed: the latest its statement's snapshot could be. */
  readonly to: number;
}

/** When the snapshot that chose B (reserved by `attempt`) can have been taken. */
function choiceWindow(eventsOfB: readonly EventRow[], attempt: AttemptRow, opts: OrderOptions): ChoiceWindow {
  const tB = attempt.reservedAt;
  const reservedEvent = eventsOfB.findIndex((e) => e.event === 'attempt_reserved' && e.at === tB);
  const chosenFrom = reservedEvent > 0 ? eventsOfB[reservedEvent - 1]! : undefined;
  const seenByThen = chosenFrom ? (chosenFrom.committedAt ?? chosenFrom.at) : -Infinity;
  return { from: Math.max(tB - opts.headReadToReserveMs, seenByThen), tB, to: Math.max(tB, attempt.committedAt ?? tB) };
}

/** A's states (null: not yet committed) any snapshot inside `w` could have seen, by commit time. */
function statesSeen(events: readonly EventRow[], w: ChoiceWindow): Array<DeliveryState | null> {
  const committed = (e: EventRow) => e.committedAt ?? e.at;
  let before: DeliveryState | null = null;
  const inside: DeliveryState[] = [];
  for (const e of events) {
    const c = committed(e);
    if (c <= w.from) before = e.to;
    else if (c <= w.to) inside.push(e.to);
  }
  return [before, ...inside];
}

/** Why the head, seen in one of the states `seen` (statesSeen), could not start an attempt when B was chosen; null: it could. */
function headExcuse(
  seen: ReadonlyArray<DeliveryState | null>,
  notBefore: readonly NotBeforeRow[],
  w: ChoiceWindow,
  opts: OrderOptions,
): Excuse | null {
  for (const state of seen) {
    if (state === null) return 'head not yet committed';
    if (state === 'UNCERTAIN') return 'head UNCERTAIN';
    if (state === 'HELD') return 'head HELD';
  }
  if (seen.some((state) => state !== null && DISPATCHABLE_STATES.includes(state))) {
    const due = lastAtOrBefore(notBefore, w.tB)?.notBefore ?? null;
    if (due !== null && due > w.tB - opts.headReadToReserveMs) return 'head not due (back-off)';
  }
  return null;
}

/** The last row (by time, then by position) at or before `t`. */
function lastAtOrBefore<T extends { at: number }>(rows: readonly T[], t: number): T | undefined {
  let found: T | undefined;
  for (const r of rows) if (r.at <= t && (found === undefined || r.at >= found.at)) found = r;
  return found;
}

function groupBy<T>(items: readonly T[], key: (t: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
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
