import { prepared, type Queryable } from '../prepared.ts';
import type { AttemptRecord, EventRecord } from '../records.ts';
import { ATTEMPT_COLUMNS, EVENT_COLUMNS } from './columns.ts';

/** A handoff's attempts (one per write) and its event log, in order. */

export async function attemptsOf(db: Queryable, handoffId: string): Promise<AttemptRecord[]> {
  const { rows } = await prepared<AttemptRecord>(
    db,
    `SELECT ${ATTEMPT_COLUMNS}
       FROM delivery_attempts WHERE handoff_id = $1 ORDER BY number`,
    [handoffId],
  );
  return rows;
}

/** The attempt a transition acts on: the newest one. */
export async function latestAttemptOf(db: Queryable, handoffId: string): Promise<AttemptRecord | null> {
  const { rows } = await prepared<AttemptRecord>(
    db,
    `SELECT ${ATTEMPT_COLUMNS}
       FROM delivery_attempts WHERE handoff_id = $1 ORDER BY number DESC LIMIT 1`,
    [handoffId],
  );
  return rows[0] ?? null;
}

/**
 * The attempt that carries `requestId` (unique), whatever handoff it is of: how a worker whose
 * reservation's reply was lost finds out whether the reservation committed.
 */
export async function attemptByRequestIdOf(db: Queryable, requestId: string): Promise<AttemptRecord | null> {
  const { rows } = await prepared<AttemptRecord>(
    db,
    `SELECT ${ATTEMPT_COLUMNS}
       FROM delivery_attempts WHERE request_id = $1`,
    [requestId],
  );
  return rows[0] ?? null;
}

export async function eventsOf(db: Queryable, handoffId: string): Promise<EventRecord[]> {
  const { rows } = await prepared<EventRecord>(
    db,
    `SELECT ${EVENT_COLUMNS}
       FROM handoff_events WHERE handoff_id = $1 ORDER BY id`,
    [handoffId],
  );
  return rows;
}
