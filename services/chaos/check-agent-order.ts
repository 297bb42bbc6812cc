import type { DemoWrite } from '../../libs/adapters/demo/demo-agent-host.ts';
import { DISPATCHABLE_STATES, type DeliveryState } from '../../libs/domain/delivery-states.ts';
import { groupBy } from './group-by.ts';
import { n, row, type InvariantRow } from './invariant-row.ts';
import type { AttemptRow, EventRow, HandoffRow, NotBeforeRow } from './invariants.ts';

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
