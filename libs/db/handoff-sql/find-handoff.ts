import { prepared, type Queryable } from '../prepared.ts';
import type { HandoffRecord, HandoffView } from '../records.ts';
import { handoffColumns, VIEW_COLUMNS, VIEW_FROM } from './columns.ts';

/** Reads of one handoff by what identifies it: its id, the sender's idempotency key, the duplicate guard's key. */

export async function findHandoff(db: Queryable, id: string): Promise<HandoffRecord | null> {
  const { rows } = await prepared<HandoffRecord>(db, `SELECT ${handoffColumns('h')} FROM handoffs h WHERE h.id = $1`, [id]);
  return rows[0] ?? null;
}

export async function findHandoffView(db: Queryable, projectId: string, id: string): Promise<HandoffView | null> {
  const { rows } = await prepared<HandoffView>(db, `SELECT ${VIEW_COLUMNS} FROM ${VIEW_FROM} WHERE h.id = $1 AND h.project_id = $2`, [
    id,
    projectId,
  ]);
  return rows[0] ?? null;
}

export async function findByIdempotencyKey(db: Queryable, senderId: string, key: string): Promise<HandoffRecord | null> {
  const { rows } = await prepared<HandoffRecord>(
    db,
    `SELECT ${handoffColumns('h')} FROM handoffs h WHERE h.sender_id = $1 AND h.idempotency_key = $2`,
    [senderId, key],
  );
  return rows[0] ?? null;
}

/** The in-progress original holding `key`, if it is still in progress. */
export async function findByInProgressKey(db: Queryable, key: string): Promise<HandoffRecord | null> {
  const { rows } = await prepared<HandoffRecord>(db, `SELECT ${handoffColumns('h')} FROM handoffs h WHERE h.in_progress_key = $1`, [key]);
  return rows[0] ?? null;
}
