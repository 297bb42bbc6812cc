import type { LogHorizon } from '../db/event-log-repository.ts';

/** A top of the event log seen while some transactions were writing events (LogHorizon). */
export interface PendingTop {
  readonly top: bigint;
  readonly writers: ReadonlySet<string>;
  readonly atMs: number;
}

/**
 * How far the event log may be read: every id <= `safe` is final (no transaction can still
 * commit a smaller one); `pending` are the tops seen since, each waiting for its writers to end.
 */
export interface SafeHorizon {
  readonly safe: bigint;
  readonly pending: readonly PendingTop[];
}

export const EMPTY_HORIZON: SafeHorizon = { safe: 0n, pending: [] };

/**
 * The safe horizon after one more look at the log (`seen`, read at `atMs`). Ids are assigned
 * when written, not when committed, so a top becomes safe only once none of the transactions
 * that were writing events when it was seen is still writing, or, should a writer's id be
 * reused or never end, once `finalAfterMs` has passed since it was seen. The safe id never
 * moves back. Pure: the event feed (event-feed.ts) and the subscription dispatcher
 * (subscription-dispatcher.ts) both read the log through it.
 */
export function advanceSafeHorizon(h: SafeHorizon, seen: LogHorizon, atMs: number, finalAfterMs: number): SafeHorizon {
  const last = h.pending[h.pending.length - 1];
  const all =
    seen.top > h.safe && (last === undefined || seen.top > last.top)
      ? [...h.pending, { top: seen.top, writers: new Set(seen.writers), atMs }]
      : h.pending;
  const writing = new Set(seen.writers);
  let safe = h.safe;
  const keep: PendingTop[] = [];
  for (const p of all) {
    const ended = ![...p.writers].some((x) => writing.has(x));
    if (ended || atMs - p.atMs >= finalAfterMs) {
      if (p.top > safe) safe = p.top;
    } else keep.push(p);
  }
  return { safe, pending: keep.filter((p) => p.top > safe) };
}
