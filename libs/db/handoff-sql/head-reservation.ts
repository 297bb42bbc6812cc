import type { DeliveryState } from '../../domain/delivery-states.ts';
import { prepared, type Queryable } from '../prepared.ts';
import { nextWorkSql, toWorkItem, type ReservedRow, type WorkItem, type WorkRow } from './next-work.ts';

/**
 * Asks a statement that reads the head of an agent's queue to reserve its attempt too (the
 * `attempt_reserved` move, exactly as a separate reservation writes it: SENDING, the attempt row
 * with the turn lock's fence, what waits behind it made BUSY), but only for a head that needs no
 * check in between: not live, addressed to the recipient's current registration, of
 * `provider`, whose connection rule is one of `passing`,
 * with no other handoff of the recipient UNCERTAIN (its turn may still be running), and WAITING,
 * or (with `queuedBusy`) BUSY only because it queued behind an earlier turn (no `not_before`: it
 * never got a busy answer). The caller vouches for the rest: delivery is not paused, the provider
 * is not down, and its adapter answers "busy" on the write itself.
 */
export interface HeadReservation {
  attemptId: string;
  requestId: string;
  workerId: string;
  fence: bigint;
  provider: string;
  /**
   * The sender-to-recipient connection rules under which the head may go out now, as the
   * caller's hold rule decided them (`none`: no rule recorded for the pair).
   */
  passing: { none: boolean; rules: readonly string[] };
  /** Where `attempt_reserved` takes the head (from WAITING or BUSY), as the transition table planned it. */
  to: DeliveryState;
  /** The recipient's other WAITING handoffs: moved with `queued.event` to `queued.to`. */
  queued: { to: DeliveryState; event: string; reason: string };
  /**
   * Whether a BUSY head that only queued behind an earlier turn may be reserved: right after
   * that turn was seen to end (the session is between turns). Otherwise only a WAITING head is,
   * and a BUSY one is left to `deliver`, which asks the session first (the turn before it may
   * have been released by a person while the session is still in it).
   */
  queuedBusy: boolean;
}

/** One run's reserving look-up, waiting for its batch. */
export interface ReservingLookUp {
  recipientId: string;
  now: Date;
  deployment: string;
  reserve: HeadReservation;
}

/**
 * What a reservation writes, as SQL expressions: parameters of one statement
 * (`reservationParams`), or the columns of a batch's input rows (`x.*`, `nextWorkMany`).
 */
export interface ReservationColumns {
  attemptId: string;
  requestId: string;
  workerId: string;
  fence: string;
  provider: string;
  queuedBusy: string;
  passingNone: string;
  passingRules: string;
  to: string;
  queuedTo: string;
  queuedEvent: string;
  queuedReason: string;
}

/** A HeadReservation as parameters of one statement (`p` adds them). */
export function reservationParams(r: HeadReservation, p: (value: unknown, type: string) => string): ReservationColumns {
  return {
    attemptId: p(r.attemptId, 'uuid'),
    requestId: p(r.requestId, 'uuid'),
    workerId: p(r.workerId, 'text'),
    fence: p(r.fence.toString(), 'bigint'),
    provider: p(r.provider, 'text'),
    queuedBusy: p(r.queuedBusy, 'boolean'),
    passingNone: p(r.passing.none, 'boolean'),
    passingRules: p(r.passing.rules, 'text[]'),
    to: p(r.to, 'delivery_state'),
    queuedTo: p(r.queued.to, 'delivery_state'),
    queuedEvent: p(r.queued.event, 'text'),
    queuedReason: p(r.queued.reason, 'text'),
  };
}

/**
 * CTEs that reserve the attempt of the head read by CTE `nw` (nextWorkSql's columns), as
 * HeadReservation says, for every row of `from` (`nw`, or `nw` joined to a batch's input rows)
 * whose head qualifies: `c` names what each reservation writes, `at` the statement's time, and
 * `requires` is a further condition (the end of the previous turn committed). Set-based, so one
 * statement reserves the heads of many agents as it does one. The final SELECT reads
 * "reservedRevision" and "reservedEventIds" from `reservedColumns`.
 */
export function reserveHeadSql(c: ReservationColumns, from: string, at: string, requires: string): string {
  return `r_head AS (
      SELECT nw.id, nw."deliveryState" AS from_state, nw.revision, nw."recipientId" AS recipient_id, ${at} AS at,
        ${c.attemptId} AS attempt_id, ${c.requestId} AS request_id, ${c.workerId} AS worker_id, ${c.fence} AS fence, ${c.to} AS to_state,
        ${c.queuedTo} AS queued_to, ${c.queuedEvent} AS queued_event, ${c.queuedReason} AS queued_reason
      FROM ${from}
      WHERE NOT nw.live AND NOT nw."uncertainTurn" AND nw."recipientCurrent" AND nw.provider::text = ${c.provider}
        AND (nw."deliveryState" = 'WAITING' OR (${c.queuedBusy} AND nw."deliveryState" = 'BUSY' AND nw."notBefore" IS NULL))
        AND (nw."connectionRule" IS NULL AND ${c.passingNone} OR nw."connectionRule"::text = ANY(${c.passingRules}))${requires}
    ), r_fenced AS (
      INSERT INTO agent_turn_fences AS f (agent_id, fence)
      SELECT recipient_id, fence FROM r_head
      ON CONFLICT (agent_id) DO UPDATE SET fence = EXCLUDED.fence WHERE f.fence <= EXCLUDED.fence
      RETURNING agent_id
    ), r_moved AS (
      UPDATE handoffs h SET delivery_state = r_head.to_state, revision = h.revision + 1, updated_at = r_head.at, attempt_count = h.attempt_count + 1,
        delivery_detail = NULL, not_before = NULL
      FROM r_head WHERE h.id = r_head.id AND h.revision = r_head.revision AND h.delivery_state = r_head.from_state
        AND EXISTS (SELECT 1 FROM r_fenced WHERE r_fenced.agent_id = r_head.recipient_id)
      RETURNING h.id, h.revision, h.attempt_count, h.delivery_target, h.recipient_id, r_head.from_state, r_head.at, r_head.attempt_id,
        r_head.request_id, r_head.worker_id, r_head.fence, r_head.to_state, r_head.queued_to, r_head.queued_event, r_head.queued_reason
    ), r_att AS (
      INSERT INTO delivery_attempts (id, handoff_id, number, request_id, status, worker_id, delivery_target, started_at, fence)
      SELECT attempt_id, id, attempt_count, request_id, 'sending', worker_id, delivery_target, at, fence FROM r_moved
    ), r_ev AS (
      INSERT INTO handoff_events (handoff_id, from_state, to_state, work_from_state, work_to_state, event, actor_kind, actor_id, token_id, reason, detail,
        revision, attempt_id, created_at)
      SELECT id, from_state, to_state, NULL, NULL, 'attempt_reserved', 'system', worker_id, NULL, 'attempt ' || attempt_count,
        jsonb_build_object('requestId', request_id::text), revision, attempt_id, at FROM r_moved
      RETURNING id, handoff_id
    ), r_queued AS (
      UPDATE handoffs q SET delivery_state = m.queued_to, revision = q.revision + 1, updated_at = m.at
      FROM r_moved m WHERE q.recipient_id = m.recipient_id AND q.delivery_state = 'WAITING' AND q.id <> m.id
      RETURNING q.id, q.revision, q.recipient_id, m.at, m.worker_id, m.queued_to, m.queued_event, m.queued_reason
    ), r_queued_ev AS (
      INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, reason, revision, created_at)
      SELECT id, 'WAITING', queued_to, queued_event, 'system', worker_id, queued_reason, revision, at FROM r_queued
      RETURNING id, handoff_id
    )`;
}

/** Per row of `nw`: the revision its reservation left and the event rows it appended (its own and its queue's). */
export const reservedColumns = `(SELECT m.revision FROM r_moved m WHERE m.id = nw.id) AS "reservedRevision",
  ARRAY(SELECT r.id::text FROM (
    SELECT e.id FROM r_ev e WHERE e.handoff_id = nw.id
    UNION ALL SELECT qe.id FROM r_queued_ev qe JOIN r_queued q ON q.id = qe.handoff_id WHERE q.recipient_id = nw."recipientId"
  ) r ORDER BY r.id) AS "reservedEventIds"`;

/**
 * Reserving look-ups of a batch ($1: one JSON object per agent, `n` its place): each agent's
 * head (nextWorkSql over the row's columns, in a lateral subquery: per-row index probes) and
 * its reservation (reserveHeadSql over the row's columns).
 */
export const NEXT_WORK_MANY_SQL = `WITH x AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(n int, recipient uuid, now timestamptz, deployment text, attempt_id uuid, request_id uuid,
      worker_id text, fence bigint, provider text, queued_busy boolean, passing_none boolean, passing_rules text[], to_state delivery_state,
      queued_to delivery_state, queued_event text, queued_reason text)
  ), nw AS (
    SELECT x.n, w.* FROM x LEFT JOIN LATERAL (${nextWorkSql('x.recipient', 'x.now', 'x.deployment')}) w ON true
  ), ${reserveHeadSql(
    {
      attemptId: 'x.attempt_id',
      requestId: 'x.request_id',
      workerId: 'x.worker_id',
      fence: 'x.fence',
      provider: 'x.provider',
      queuedBusy: 'x.queued_busy',
      passingNone: 'x.passing_none',
      passingRules: 'x.passing_rules',
      to: 'x.to_state',
      queuedTo: 'x.queued_to',
      queuedEvent: 'x.queued_event',
      queuedReason: 'x.queued_reason',
    },
    'nw JOIN x ON x.n = nw.n',
    'x.now',
    '',
  )}
  SELECT nw.*, ${reservedColumns} FROM nw ORDER BY nw.n`;

/**
 * Reserving look-ups of several agents in one statement: each row's head is read and
 * reserved exactly as `nextWork` does for one (reserveHeadSql is set-based), one commit.
 */
export async function nextWorkMany(db: Queryable, items: ReservingLookUp[]): Promise<Array<WorkItem | null>> {
  const input = items.map((it, n) => ({
    n,
    recipient: it.recipientId,
    now: it.now,
    deployment: it.deployment,
    attempt_id: it.reserve.attemptId,
    request_id: it.reserve.requestId,
    worker_id: it.reserve.workerId,
    fence: it.reserve.fence.toString(),
    provider: it.reserve.provider,
    queued_busy: it.reserve.queuedBusy,
    passing_none: it.reserve.passing.none,
    passing_rules: it.reserve.passing.rules,
    to_state: it.reserve.to,
    queued_to: it.reserve.queued.to,
    queued_event: it.reserve.queued.event,
    queued_reason: it.reserve.queued.reason,
  }));
  const { rows } = await prepared<WorkRow & ReservedRow & { n: number }>(db, NEXT_WORK_MANY_SQL, [JSON.stringify(input)]);
  const byN = new Map(rows.map((r) => [r.n, r]));
  return items.map((it, n) => {
    const row = byN.get(n);
    if (!row || !row.id) return null;
    const { n: _n, ...work } = row;
    return toWorkItem(work, it.reserve);
  });
}
