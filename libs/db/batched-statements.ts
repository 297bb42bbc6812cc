import type pg from 'pg';
import { isDatabaseUnavailable } from './classify-error.ts';
import { GroupCommit, type InFlightAtDeadline } from './group-commit.ts';
import type { Queryable } from './prepared.ts';
import { GROUP_COMMIT_DEFAULTS } from '../config/component-defaults.ts';

/**
 * How a repository's batched statements (`GroupCommit`: enrollments, reserving look-ups, turn
 * ends) are sized and bounded for the pool they run on: how many of one kind are in Postgres at
 * once, which failures are about the items, and each call's deadline.
 */

/**
 * Batched statements of one kind a process keeps in Postgres at once; calls that come
 * meanwhile wait and go in the next one. At most half the pool, so reads and the rest of the
 * delivery path keep connections.
 */
const BATCHES_MAX_IN_FLIGHT = GROUP_COMMIT_DEFAULTS.maxBatchesInFlight;

/** Batched statements of one kind in flight for a pool of `poolSize` connections (unknown: a single client). */
export function batchesInFlight(poolSize: number | undefined): number {
  if (poolSize === undefined) return 1;
  return Math.max(1, Math.min(BATCHES_MAX_IN_FLIGHT, Math.floor(poolSize / 2)));
}

/**
 * When a batched statement fails: Postgres away, every item would fail alone too (and a
 * reserving look-up reads its head again). Anything else (a value one row cannot take, a
 * deadlock between two batches) rolled the whole statement back: each item is tried alone.
 */
export const isolateUnlessUnavailable = (err: unknown): boolean => !isDatabaseUnavailable(err);

/**
 * The deadline of a call on this pool: the bound every database call has (libs/domain
 * database-timeouts.ts, given to openDatabase), a connection within `connectMs` plus the reply
 * within `queryMs`. Read from the pool's own options, so a batched call is bounded exactly as
 * one statement of its own would be. Undefined for a single client (a transaction's), which
 * has no pool to wait for.
 */
export function callDeadlineMs(pool: Queryable): number | undefined {
  const options = (pool as Partial<pg.Pool>).options;
  const connectMs = options?.connectionTimeoutMillis;
  const queryMs = options?.query_timeout;
  if (!connectMs || !queryMs) return undefined;
  return connectMs + queryMs;
}

/**
 * A `GroupCommit` for statements of one kind on `pool`: `maxInFlight` from the pool's size, a
 * batch that failed for its items run again item by item, and each call bounded by the pool's
 * call deadline. `inFlightAtDeadline`: see `InFlightAtDeadline` (`answer` only where a 503 is
 * documented to mean "may or may not have been recorded").
 */
export function batchedStatement<I, O>(
  pool: Queryable,
  run: (items: I[]) => Promise<O[]>,
  opts: { maxBatch: number; inFlightAtDeadline: InFlightAtDeadline },
): GroupCommit<I, O> {
  return new GroupCommit<I, O>(run, {
    maxInFlight: batchesInFlight((pool as Partial<pg.Pool>).options?.max),
    maxBatch: opts.maxBatch,
    isolate: isolateUnlessUnavailable,
    deadlineMs: callDeadlineMs(pool),
    inFlightAtDeadline: opts.inFlightAtDeadline,
  });
}
