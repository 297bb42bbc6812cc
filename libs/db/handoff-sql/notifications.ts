import type { Viewer } from '../../domain/visibility.ts';
import { prepared, type Queryable } from '../prepared.ts';
import type { NotificationRecord } from '../records.ts';
import { visibleSql } from '../visible-sql.ts';

/** Deadline reminders and the notifications they (and closed work) leave: written and read. */

/**
 * Sends the one deadline reminder each overdue, still-open handoff gets: marks it and
 * writes a notification for its sender in the same statement. The mark is conditional, so
 * concurrent sweeps remind once. Returns the reminded handoff ids.
 */
export async function sendDueReminders(db: Queryable, now: Date, limit: number): Promise<string[]> {
  const { rows } = await prepared<{ id: string }>(
    db,
    `WITH due AS (
         SELECT id FROM handoffs
         WHERE due_at IS NOT NULL AND due_at <= $1 AND reminder_sent_at IS NULL AND settled_at IS NULL
         ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED
       ), marked AS (
         UPDATE handoffs h SET reminder_sent_at = $1 FROM due WHERE h.id = due.id AND h.reminder_sent_at IS NULL
         RETURNING h.id, h.sender_id, h.due_at, h.delivery_state, h.title, h.message
       ), notified AS (
         INSERT INTO notifications (id, handoff_id, agent_id, kind, text, created_at)
         SELECT gen_random_uuid(), m.id, m.sender_id, 'deadline_passed',
           'due ' || to_char(m.due_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ' and still ' || m.delivery_state || ': ' || left(coalesce(m.title, m.message), 120),
           $1
         FROM marked m
         ON CONFLICT (handoff_id, kind, agent_id) DO NOTHING
       )
       SELECT id FROM marked`,
    [now, limit],
  );
  return rows.map((r) => r.id);
}

export async function notificationsOfHandoff(db: Queryable, handoffId: string): Promise<NotificationRecord[]> {
  const { rows } = await prepared<NotificationRecord>(
    db,
    `SELECT id, handoff_id AS "handoffId", agent_id AS "agentId", kind, text, created_at AS "createdAt", read_at AS "readAt"
       FROM notifications WHERE handoff_id = $1 ORDER BY created_at`,
    [handoffId],
  );
  return rows;
}

/** An agent's notifications, newest first. */
export async function notificationsForAgent(
  db: Queryable,
  agentId: string,
  limit: number,
  viewer: Viewer,
): Promise<Array<NotificationRecord & { handoffTitle: string | null }>> {
  const params: unknown[] = [agentId, limit];
  const { rows } = await prepared<NotificationRecord & { handoffTitle: string | null }>(
    db,
    `SELECT n.id, n.handoff_id AS "handoffId", n.agent_id AS "agentId", n.kind, n.text, n.created_at AS "createdAt",
         n.read_at AS "readAt", h.title AS "handoffTitle"
       FROM notifications n JOIN handoffs h ON h.id = n.handoff_id
       WHERE n.agent_id = $1 AND ${visibleSql(viewer, params)} ORDER BY n.created_at DESC LIMIT $2`,
    params,
  );
  return rows;
}
