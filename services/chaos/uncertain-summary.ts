import type { DemoWrite } from '../../libs/adapters/demo/demo-agent-host.ts';
import type { AttemptRow, EventRow } from './invariants.ts';

/**
 * What became of the handoffs that went UNCERTAIN during a chaos run, and whether each one's
 * write had reached a session at all. Not an invariant (an UNCERTAIN handoff is allowed, and
 * settled by the checks above): it says what the run cost, and why. A "never-written" episode
 * is one whose request id is nowhere in the demo host's write log: no session ever saw it, so
 * it could have been sent again had anyone been able to prove that, and a CANCELLED ending is
 * a handoff lost to the fault. Pure, like invariants.ts.
 */

/** What the run knows of the process that reserved an attempt (workers are named `<host>-<pid>`). */
export type ProcessFate = 'sigkilled by the run' | 'exited by itself' | 'alive to the end' | 'unknown';

/** One stay of one handoff in UNCERTAIN, from the move into it to the move out of it. */
export interface UncertainEpisode {
  readonly handoffId: string;
  readonly requestId: string | null;
  /** Its request id reached a session (in the write log, whatever the session answered). */
  readonly written: boolean;
  /** The worker that reserved the attempt, and what became of it. */
  readonly reservedBy: string | null;
  readonly reserverFate: ProcessFate;
  /** The worker that moved it to UNCERTAIN, and why (the event's reason). */
  readonly markedBy: string | null;
  readonly reason: string | null;
  /** The event that ended the stay (`proven_absent`, `unsent_proven`, `observed_returned`...), or null: still UNCERTAIN at the end. */
  readonly outcome: string | null;
  /** Complete history scans that missed it meanwhile. */
  readonly absenceScans: number;
  /** From the move into UNCERTAIN to the first history scan's verdict (a miss, or the end), ms; null: none yet. */
  readonly firstScanAfterMs: number | null;
  /** How long it stayed UNCERTAIN (ms); null while it still is. */
  readonly uncertainMs: number | null;
  /** From the reservation to the move into UNCERTAIN (ms). */
  readonly reservedToUncertainMs: number | null;
}

/** The least, the median and the most of some durations (ms). */
export interface Spread {
  readonly min: number;
  readonly median: number;
  readonly max: number;
}

function spread(values: ReadonlyArray<number | null>): Spread | null {
  const v = values.filter((x): x is number => x !== null).sort((a, b) => a - b);
  return v.length ? { min: v[0]!, median: v[Math.floor(v.length / 2)]!, max: v.at(-1)! } : null;
}

export interface UncertainSummary {
  readonly episodes: number;
  readonly handoffs: number;
  readonly written: number;
  readonly neverWritten: {
    readonly total: number;
    /** How the never-written stays ended, by event ('still UNCERTAIN' for none). */
    readonly outcomes: Readonly<Record<string, number>>;
    /** Of those that ended CANCELLED (`proven_absent`): what became of the worker that reserved them. */
    readonly cancelledByReserverFate: Readonly<Record<string, number>>;
    readonly uncertainMs: Spread | null;
    /** Of those CANCELLED: from the reservation to the move into UNCERTAIN, and from there to the first scan. */
    readonly cancelledReservedToUncertainMs: Spread | null;
    readonly cancelledToFirstScanMs: Spread | null;
    /** Every never-written stay (at most MAX_LISTED). */
    readonly list: readonly UncertainEpisode[];
  };
}

const MAX_LISTED = 200;

/** The events of the run, with each one's reason (the summary needs it; the invariants do not). */
export type ReasonedEvent = EventRow & { readonly reason?: string | null };

export function summarizeUncertain(
  events: readonly ReasonedEvent[],
  attempts: readonly AttemptRow[],
  writes: readonly DemoWrite[],
  fateOf: (actor: string | null) => ProcessFate,
): UncertainSummary {
  const written = new Set(writes.map((w) => w.requestId));
  const attemptsOf = new Map<string, AttemptRow[]>();
  for (const a of attempts) attemptsOf.set(a.handoffId, [...(attemptsOf.get(a.handoffId) ?? []), a]);
  const eventsOf = new Map<string, ReasonedEvent[]>();
  for (const e of events) eventsOf.set(e.handoffId, [...(eventsOf.get(e.handoffId) ?? []), e]);

  const episodes: UncertainEpisode[] = [];
  for (const [handoffId, list] of eventsOf) {
    const sorted = [...list].sort((a, b) => a.id - b.id);
    let reservation: ReasonedEvent | null = null;
    for (let i = 0; i < sorted.length; i++) {
      const e = sorted[i]!;
      if (e.event === 'attempt_reserved') reservation = e;
      if (e.to !== 'UNCERTAIN' || e.event === 'scan_missed') continue;
      // The attempt it is about: the last one reserved before it went UNCERTAIN.
      const attempt = (attemptsOf.get(handoffId) ?? []).filter((a) => a.reservedAt <= e.at).sort((a, b) => b.reservedAt - a.reservedAt)[0];
      let j = i + 1;
      let scans = 0;
      for (; j < sorted.length && sorted[j]!.to === 'UNCERTAIN'; j++) if (sorted[j]!.event === 'scan_missed') scans++;
      const end = sorted[j];
      const firstVerdict = sorted[i + 1];
      episodes.push({
        handoffId,
        requestId: attempt?.requestId ?? null,
        written: attempt ? written.has(attempt.requestId) : false,
        reservedBy: reservation?.actor ?? null,
        reserverFate: fateOf(reservation?.actor ?? null),
        markedBy: e.actor,
        reason: e.reason ?? null,
        outcome: end?.event ?? null,
        absenceScans: scans,
        firstScanAfterMs: firstVerdict ? firstVerdict.at - e.at : null,
        uncertainMs: end ? end.at - e.at : null,
        reservedToUncertainMs: reservation ? e.at - reservation.at : null,
      });
      i = j - 1;
    }
  }
  const never = episodes.filter((ep) => !ep.written);
  const count = (items: readonly string[]) => items.reduce<Record<string, number>>((m, k) => ({ ...m, [k]: (m[k] ?? 0) + 1 }), {});
  const cancelled = never.filter((ep) => ep.outcome === 'proven_absent');
  return {
    episodes: episodes.length,
    handoffs: new Set(episodes.map((ep) => ep.handoffId)).size,
    written: episodes.length - never.length,
    neverWritten: {
      total: never.length,
      outcomes: count(never.map((ep) => ep.outcome ?? 'still UNCERTAIN')),
      cancelledByReserverFate: count(never.filter((ep) => ep.outcome === 'proven_absent').map((ep) => ep.reserverFate)),
      uncertainMs: spread(never.map((ep) => ep.uncertainMs)),
      cancelledReservedToUncertainMs: spread(cancelled.map((ep) => ep.reservedToUncertainMs)),
      cancelledToFirstScanMs: spread(cancelled.map((ep) => ep.firstScanAfterMs)),
      list: never.slice(0, MAX_LISTED),
    },
  };
}

/** Two lines for the report: how many went UNCERTAIN, and what became of the never-written ones. */
export function renderUncertain(s: UncertainSummary): string[] {
  if (s.episodes === 0) return ['UNCERTAIN: no handoff went UNCERTAIN'];
  const nw = s.neverWritten;
  const list = (m: Readonly<Record<string, number>>) =>
    Object.entries(m)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
  const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const spell = (x: Spread) => `${secs(x.min)}–${secs(x.max)} (median ${secs(x.median)})`;
  return [
    `UNCERTAIN: ${s.handoffs} handoffs went UNCERTAIN (${s.episodes} times); ${s.written} of those writes had reached a session, ${nw.total} never had (never-written)`,
    ...(nw.total > 0
      ? [
          `  never-written, how each ended: ${list(nw.outcomes)}${nw.uncertainMs ? `; UNCERTAIN for ${spell(nw.uncertainMs)}` : ''}`,
          ...(Object.keys(nw.cancelledByReserverFate).length > 0
            ? [`  never-written and CANCELLED, the worker that reserved them: ${list(nw.cancelledByReserverFate)}`]
            : []),
          ...(nw.cancelledReservedToUncertainMs && nw.cancelledToFirstScanMs
            ? [
                `  never-written and CANCELLED: reserved to UNCERTAIN ${spell(nw.cancelledReservedToUncertainMs)}, UNCERTAIN to the first history scan ${spell(nw.cancelledToFirstScanMs)}`,
              ]
            : []),
        ]
      : []),
  ];
}
