import { DISPATCHABLE_STATES, LIVE_TURN_STATES } from '../../domain/delivery-states.ts';
import { prepared, type Queryable } from '../prepared.ts';
import type { AttemptRecord, HandoffRecord } from '../records.ts';
import { handoffColumns, stateList } from './columns.ts';

/** The head of an agent's queue, with the sender-to-recipient connection rule (for holds). */
export type DispatchCandidate = HandoffRecord & { connectionRule: 'allow' | 'block' | null };

/**
 * What the lock holder of an agent does next, with everything needed to do it (one query):
 * a turn to follow (`live`), or the oldest handoff to deliver.
 */
export interface WorkItem {
  handoff: DispatchCandidate;
  /** A turn may be live (SENDING, ACCEPTED, RUNNING): follow it before starting anything new. */
  live: boolean;
  /**
   * Another handoff of the recipient is UNCERTAIN: its write may have landed and the session
   * may still be in that turn, so the session is asked before anything new is written to it.
   */
  uncertainTurn: boolean;
  senderHandle: string;
  recipient: { handle: string; settings: Record<string, unknown>; current: boolean } | null;
  /** The newest attempt, for a live turn. */
  attempt: Pick<AttemptRecord, 'id' | 'requestId' | 'startedAt' | 'acceptedAt'> | null;
  /**
   * Set when the statement that read this head also reserved its attempt (HeadReservation):
   * `handoff` is as it was before; the handoff is now SENDING at `revision`, with the attempt
   * of the reservation's ids. `eventIds`: the event rows the reservation appended.
   */
  reserved?: { revision: number; attemptId: string; requestId: string; eventIds: string[] };
}

/**
 * The agent's head of queue: one index probe per state on (recipient_id, delivery_state, seq),
 * each stopping at its first row, so the cost does not grow with the agent's backlog. The
 * states are literals, not parameters: with array parameters Postgres re-planned this
 * statement on every call (docs/performance-history.md, "What changed in this round (each
 * measured)").
 * Nothing at all when the agent belongs to another deployment than $3 (`OWNED_BY`: a one-time
 * primary-key probe before the rest runs).
 */
const ownedBy = (recipient: string, deployment: string) =>
  `EXISTS (SELECT 1 FROM agents o WHERE o.id = ${recipient} AND o.deployment = ${deployment})`;
const OWNED_BY = ownedBy('$1', '$3');

/**
 * The head of an agent's queue with everything a turn needs, as SQL over the given parameter
 * placeholders (recipient, now, deployment), leaving out `exclude` (a handoff the same
 * statement just moved: its old row is what this statement's snapshot still sees).
 */
export function nextWorkSql(recipient: string, now: string, deployment: string, exclude?: string): string {
  const notExcluded = exclude ? ` AND id <> ${exclude}` : '';
  return `WITH head AS (
    SELECT c.id, c.live FROM (
      ${[
        ...LIVE_TURN_STATES.map(
          (st) =>
            `(SELECT id, seq, true AS live FROM handoffs WHERE recipient_id = ${recipient} AND delivery_state = '${st}' AND attempt_count > 0${notExcluded} ORDER BY seq LIMIT 1)`,
        ),
        ...DISPATCHABLE_STATES.map(
          (st) =>
            `(SELECT id, seq, false AS live FROM handoffs WHERE recipient_id = ${recipient} AND delivery_state = '${st}' AND (not_before IS NULL OR not_before <= ${now})${notExcluded} ORDER BY seq LIMIT 1)`,
        ),
      ].join('\n      UNION ALL ')}
    ) c WHERE ${ownedBy(recipient, deployment)} ORDER BY c.live DESC, c.seq LIMIT 1
  )
  SELECT ${handoffColumns('h')}, c.rule AS "connectionRule", head.live,
    s.handle AS "senderHandle", r.handle AS "recipientHandle", r.provider_settings AS "recipientSettings",
    (r.removed_at IS NULL AND r.generation = h.recipient_generation) AS "recipientCurrent",
    EXISTS (SELECT 1 FROM handoffs u WHERE u.recipient_id = h.recipient_id AND u.delivery_state = 'UNCERTAIN') AS "uncertainTurn",
    a.id AS "attemptId", a.request_id AS "attemptRequestId", a.started_at AS "attemptStartedAt", a.accepted_at AS "attemptAcceptedAt"
  FROM head
  JOIN handoffs h ON h.id = head.id
  JOIN agents s ON s.id = h.sender_id
  LEFT JOIN agents r ON r.id = h.recipient_id
  LEFT JOIN connections c ON c.from_id = h.sender_id AND c.to_id = h.recipient_id
  LEFT JOIN LATERAL (
    SELECT d.id, d.request_id, d.started_at, d.accepted_at FROM delivery_attempts d
    WHERE d.handoff_id = h.id AND head.live ORDER BY d.number DESC LIMIT 1
  ) a ON true`;
}

const NEXT_WORK_SQL = nextWorkSql('$1', '$2', '$3');

export type WorkRow = DispatchCandidate & {
  live: boolean;
  senderHandle: string;
  recipientHandle: string | null;
  recipientSettings: Record<string, unknown> | null;
  recipientCurrent: boolean | null;
  uncertainTurn: boolean;
  attemptId: string | null;
  attemptRequestId: string | null;
  attemptStartedAt: Date | null;
  attemptAcceptedAt: Date | null;
};

export type ReservedRow = { reservedRevision?: number | null; reservedEventIds?: string[] };

/** A look-up's row as a WorkItem; `reservation`: what the statement was asked to reserve, if anything. */
export function toWorkItem(row: WorkRow & ReservedRow, reservation?: { attemptId: string; requestId: string }): WorkItem {
  const {
    live,
    uncertainTurn,
    senderHandle,
    recipientHandle,
    recipientSettings,
    recipientCurrent,
    attemptId,
    attemptRequestId,
    attemptStartedAt,
    attemptAcceptedAt,
    reservedRevision,
    reservedEventIds,
    ...handoff
  } = row;
  return {
    handoff,
    live,
    uncertainTurn,
    senderHandle,
    recipient:
      recipientHandle === null ? null : { handle: recipientHandle, settings: recipientSettings ?? {}, current: recipientCurrent === true },
    attempt:
      attemptId && attemptRequestId && attemptStartedAt
        ? { id: attemptId, requestId: attemptRequestId, startedAt: attemptStartedAt, acceptedAt: attemptAcceptedAt }
        : null,
    ...(reservation && reservedRevision !== null && reservedRevision !== undefined
      ? {
          reserved: {
            revision: reservedRevision,
            attemptId: reservation.attemptId,
            requestId: reservation.requestId,
            eventIds: reservedEventIds ?? [],
          },
        }
      : {}),
  };
}

/**
 * The agent's next piece of work: first a turn that may be live (oldest first), else the
 * oldest handoff that may start an attempt now; with its sender, recipient, connection rule
 * and (for a live turn) newest attempt. Only the holder of the agent's turn lock calls this.
 * null when the agent belongs to another deployment than `deployment`: its turn lock lives in
 * that deployment's Redis, so no lock this caller holds entitles it to the agent's turns.
 * The look-up that also reserves the head it finds: head-reservation.ts.
 */
export async function nextWork(db: Queryable, recipientId: string, now: Date, deployment: string): Promise<WorkItem | null> {
  const { rows } = await prepared<WorkRow>(db, NEXT_WORK_SQL, [recipientId, now, deployment]);
  const row = rows[0];
  return row ? toWorkItem(row) : null;
}

/**
 * Whether the agent has work now (two probes that stop at their first row), else the earliest
 * not_before, looked for only when nothing is due (then every open handoff is waiting for its time).
 * No row when the agent belongs to another deployment than $3.
 */
const NEXT_WORK_AT_SQL = `WITH d AS (
    SELECT EXISTS (SELECT 1 FROM handoffs WHERE recipient_id = $1 AND delivery_state IN (${stateList(LIVE_TURN_STATES)}) AND attempt_count > 0)
        OR EXISTS (SELECT 1 FROM handoffs WHERE recipient_id = $1 AND delivery_state IN (${stateList(DISPATCHABLE_STATES)}) AND (not_before IS NULL OR not_before <= $2)) AS due
  )
  SELECT d.due, CASE WHEN d.due THEN NULL
    ELSE (SELECT min(not_before) FROM handoffs WHERE recipient_id = $1 AND delivery_state IN (${stateList(DISPATCHABLE_STATES)})) END AS at
  FROM d WHERE ${OWNED_BY}`;

/**
 * When the recipient next has work: 'now' if something is dispatchable or in flight, the
 * earliest not_before otherwise, or null when nothing is open (or the agent belongs to
 * another deployment than `deployment`).
 */
export async function nextWorkAt(db: Queryable, recipientId: string, now: Date, deployment: string): Promise<'now' | Date | null> {
  const { rows } = await prepared<{ due: boolean; at: Date | null }>(db, NEXT_WORK_AT_SQL, [recipientId, now, deployment]);
  const row = rows[0];
  if (!row) return null;
  return row.due ? 'now' : row.at;
}
