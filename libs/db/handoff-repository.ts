import type { Viewer } from '../domain/visibility.ts';
import { visibleSql } from './visible-sql.ts';
import { prepared, type Queryable } from './prepared.ts';
import type { GroupCommit } from './group-commit.ts';
import { batchedStatement } from './batched-statements.ts';
import type pg from 'pg';
import { DISPATCHABLE_STATES, LIVE_TURN_STATES, type DeliveryState } from '../domain/delivery-states.ts';
import type { ActorKind } from '../domain/transitions.ts';
import type { WorkResultEffect, WorkState } from '../domain/work-states.ts';
import { ATTEMPT_COLUMNS, EVENT_COLUMNS, handoffColumns, stateList, VIEW_COLUMNS, VIEW_FROM } from './handoff-sql/columns.ts';
import type { AttemptRecord, AttemptStatus, EventRecord, HandoffRecord, HandoffView, NotificationRecord, ProviderName } from './records.ts';

export type { Queryable } from './prepared.ts';

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
 * Asks a statement that reads the head of an agent's queue to reserve its attempt too (the
 * `attempt_reserved` move, exactly as a separate reservation writes it: SENDING, the attempt row
 * with the turn lock's fence, what waits behind it made BUSY), but only for a head that needs no
 * check in between: not live, addressed to the recipient's current registration, of
 * `provider`, whose connection rule is one of `passing`,
 * with no other handoff of the recipient UNCERTAIN (its turn may still be running), and WAITING, or (with `queuedBusy`) BUSY only because it queued behind an earlier turn (no
 * `not_before`: it never got a busy answer). The caller vouches for the rest: delivery is not paused, the provider is
 * not down, and its adapter answers "busy" on the write itself.
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

/**
 * SQL over the handoffs, delivery_attempts and handoff_events tables. Raw SQL on purpose: the
 * delivery hot path is one round trip per transition (update + event row [+ attempt row] in a
 * single statement). Only libs/handoffs calls the writing functions; nothing here decides
 * whether a move is allowed.
 */

/** Enrollments per statement (enrollMany); how many are in flight and their deadline: batched-statements.ts. */
const ENROLL_MAX_BATCH = 64;
/** Reserving look-ups per statement (nextWorkMany). */
const LOOK_UP_MAX_BATCH = 32;

/** One run's reserving look-up, waiting for its batch. */
interface ReservingLookUp {
  recipientId: string;
  now: Date;
  deployment: string;
  reserve: HeadReservation;
}

const H = handoffColumns;

/**
 * What enrollment writes. Sender and recipient are named by handle: the statement resolves
 * them (and the project) itself, so a send is one round trip.
 */
export interface Enrollment
  extends Pick<
    HandoffRecord,
    | 'id'
    | 'title'
    | 'message'
    | 'focus'
    | 'doneWhen'
    | 'contextSummary'
    | 'openQuestions'
    | 'nextSteps'
    | 'dueAt'
    | 'idempotencyKey'
    | 'contentHash'
    | 'duplicateOfId'
    | 'deliveryState'
    | 'deliveryDetail'
    | 'createdAt'
  > {
  projectSlug: string;
  fromHandle: string;
  /** null: unowned work addressed to the project (any of its agents may claim it). */
  toHandle: string | null;
  /** The tracked session the handoff belongs to (must be in the same project). */
  sessionId: string | null;
  /** true: set in_progress_key (an original without an idempotency key), so an identical send conflicts. */
  guardDuplicates: boolean;
  workState: WorkState | null;
  /**
   * When the recipient has a turn in flight, insert the handoff already BUSY: `to` and `event`
   * are the second move (planned by the caller), written as a second event row.
   */
  busyIfLive?: { to: DeliveryState; event: EventWrite } | undefined;
}

/** What one enrollment statement found and did. */
export interface EnrollOutcome {
  projectId: string | null;
  senderId: string | null;
  recipientId: string | null;
  recipientProvider: ProviderName | null;
  recipientGeneration: number | null;
  /** The deployment that owns the recipient: only its workers deliver the handoff. */
  recipientDeployment: string | null;
  /** false: the session named does not exist in the project (nothing inserted). */
  sessionFound: boolean;
  /** The key an in-progress original holds (whether or not this insert happened). */
  inProgressKey: string | null;
  /** The rule of the sender-to-recipient connection, if one is set. */
  connectionRule: 'allow' | 'block' | null;
  /** The `connections` runtime setting as stored (JSON), if set. */
  connectionsSetting: unknown;
  /** null: nothing inserted (a missing project/agent, or a unique conflict). */
  handoff: HandoffRecord | null;
  /** The event rows the insert appended (none when nothing was inserted), in id order. */
  eventIds: string[];
}

export interface EventWrite {
  event: string;
  actorKind: ActorKind;
  actorId: string | null;
  tokenId?: string | null;
  reason?: string | null;
  detail?: unknown;
}

/** Columns a transition may also set; `undefined` leaves a column alone, `null` clears it. */
export interface HandoffPatch {
  deliveryDetail?: string | null;
  notBefore?: Date | null;
  resultSummary?: string | null;
  result?: unknown;
  settledAt?: Date | null;
  inProgressKey?: null;
}

export type HandoffCounter = 'attemptCount' | 'refusals' | 'errorResends' | 'interruptResends';

export interface AttemptInsert {
  id: string;
  number: number;
  requestId: string;
  workerId: string | null;
  deliveryTarget: string | null;
  /**
   * The reserving worker's turn-lock fencing number. The reservation raises the recipient's
   * fence (`agent_turn_fences`) to it in the same statement and is refused (nothing moves) when the agent
   * already saw a newer one: a worker that lost its lock cannot start a turn.
   */
  fence?: bigint;
}

export interface AttemptUpdate {
  id: string;
  status: AttemptStatus;
  error?: string | null;
  accepted?: boolean;
  finished?: boolean;
  observed?: boolean;
  /** A complete history scan missed the request id: count it (and remember the first). */
  absentScan?: boolean;
}

/** One move of a chain: the state it leaves, the state it reaches, and its event row. */
export interface TransitionStep {
  from: DeliveryState;
  to: DeliveryState;
  event: EventWrite;
}

/** What a committed transition statement wrote: the new revision and its event rows' ids. */
export interface TransitionWritten {
  revision: number;
  eventIds: string[];
  /**
   * With `thenNextWork`: the head of the recipient's queue as the statement found it, the moved
   * handoff left out (null: nothing dispatchable or live). Undefined without it.
   */
  nextWork?: WorkItem | null;
}

export interface TransitionWrite {
  handoffId: string;
  /** One or more moves applied together; each gets its own event row and revision. */
  steps: readonly TransitionStep[];
  /** The revision the writer read; null only for moves that are conditional on the state alone. */
  expectRevision: number | null;
  at: Date;
  patch?: HandoffPatch;
  increment?: readonly HandoffCounter[];
  insertAttempt?: AttemptInsert;
  updateAttempt?: AttemptUpdate;
  /**
   * In the same statement, moves the recipient's other handoffs that are in `from` to `to`
   * (each with its own event row): the handoffs queued behind a turn that is starting.
   */
  alsoMoveQueued?: { recipientId: string; from: DeliveryState; to: DeliveryState; event: EventWrite };
  /**
   * In the same statement, reads the head of this recipient's queue (what `nextWork` would
   * answer after the move): the end of one turn and the choice of the next in one round trip.
   */
  thenNextWork?: { recipientId: string; now: Date; deployment: string; reserve?: HeadReservation };
  /**
   * In the same statement, moves the handoff's work when it is in one of `from` (and only
   * then), with its own event row: a push turn that returned a result returns the work; a
   * delivery that ended where nobody will do the work settles it. `result`: what the work
   * table says the move does to the attempt's result (undefined: left alone). A move out of
   * the claim always ends the claim token and lease.
   */
  alsoWork?: { from: readonly string[]; to: string; event: EventWrite; result: WorkResultEffect | undefined };
}

/** Transition texts kept per shape; a process uses a few dozen (SAME_TEXT_MAX bounds a surprise). */
const sameText = new Map<string, { text: string; params: number }>();
const SAME_TEXT_MAX = 512;

/**
 * The transition text built before for the same `shape` (the choices that decide the text), as
 * the very same string: the prepared-statement name is then a look-up of a string whose hash
 * V8 keeps, and pg's check that a name still means its text compares one pointer, where a text
 * built anew (several kilobytes for the end of a turn) is hashed and compared in full on every
 * call. Two texts of one shape with different lengths or parameter counts mean a choice missing
 * from the shape: that throws rather than run the wrong text.
 */
function sameTextPerShape(shape: ReadonlyArray<string | number | boolean>, text: string, params: number): string {
  const key = shape.join('|');
  const known = sameText.get(key);
  if (known) {
    if (known.text.length !== text.length || known.params !== params) throw new Error(`transition shape ${key} built two different statements`);
    return known.text;
  }
  if (sameText.size < SAME_TEXT_MAX) sameText.set(key, { text, params });
  return text;
}

/** For tests: forgets the kept transition texts (the next of each shape is built and kept anew). */
export function forgetTransitionTexts(): void {
  sameText.clear();
}

const PATCH_COLUMNS: Record<keyof HandoffPatch, { column: string; cast: string }> = {
  deliveryDetail: { column: 'delivery_detail', cast: 'text' },
  notBefore: { column: 'not_before', cast: 'timestamptz' },
  resultSummary: { column: 'result_summary', cast: 'text' },
  result: { column: 'result', cast: 'jsonb' },
  settledAt: { column: 'settled_at', cast: 'timestamptz' },
  inProgressKey: { column: 'in_progress_key', cast: 'text' },
};

const COUNTER_COLUMNS: Record<HandoffCounter, string> = {
  attemptCount: 'attempt_count',
  refusals: 'refusals',
  errorResends: 'error_resends',
  interruptResends: 'interrupt_resends',
};

function jsonParam(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

export interface HandoffFilter {
  projectId: string;
  recipientId?: string;
  senderId?: string;
  states?: readonly DeliveryState[];
  /** Only what this caller may see. */
  viewer: Viewer;
  /** Only rows with seq below this (newest first paging). */
  beforeSeq?: bigint;
  limit: number;
}


/** The project, recipient, sender and state conditions of a filter on alias `h`, appending their parameters. */
function filterSql(f: Pick<HandoffFilter, 'projectId' | 'recipientId' | 'senderId' | 'states'>, params: unknown[]): string[] {
  params.push(f.projectId);
  const where = [`h.project_id = $${params.length}`];
  if (f.recipientId) {
    params.push(f.recipientId);
    where.push(`h.recipient_id = $${params.length}`);
  }
  if (f.senderId) {
    params.push(f.senderId);
    where.push(`h.sender_id = $${params.length}`);
  }
  if (f.states && f.states.length > 0) {
    params.push(f.states);
    where.push(`h.delivery_state = ANY($${params.length}::delivery_state[])`);
  }
  return where;
}

/**
 * The agent's head of queue: one index probe per state on (recipient_id, delivery_state, seq),
 * each stopping at its first row, so the cost does not grow with the agent's backlog (one
 * ORDER BY over every open handoff of the agent cost ~2 ms per turn at 1,000 queued). The
 * states are literals, not parameters: with array parameters Postgres re-planned this
 * statement on every call (~1.5 ms of planning per turn, seen in pg_stat_statements).
 * Nothing at all when the agent belongs to another deployment than $3 (`OWNED_BY`: a one-time
 * primary-key probe before the rest runs).
 */
const ownedBy = (recipient: string, deployment: string) => `EXISTS (SELECT 1 FROM agents o WHERE o.id = ${recipient} AND o.deployment = ${deployment})`;
const OWNED_BY = ownedBy('$1', '$3');

/**
 * The head of an agent's queue with everything a turn needs, as SQL over the given parameter
 * placeholders (recipient, now, deployment), leaving out `exclude` (a handoff the same
 * statement just moved: its old row is what this statement's snapshot still sees).
 */
function nextWorkSql(recipient: string, now: string, deployment: string, exclude?: string): string {
  const notExcluded = exclude ? ` AND id <> ${exclude}` : '';
  return `WITH head AS (
    SELECT c.id, c.live FROM (
      ${[
        ...LIVE_TURN_STATES.map(
          (st) => `(SELECT id, seq, true AS live FROM handoffs WHERE recipient_id = ${recipient} AND delivery_state = '${st}' AND attempt_count > 0${notExcluded} ORDER BY seq LIMIT 1)`,
        ),
        ...DISPATCHABLE_STATES.map(
          (st) =>
            `(SELECT id, seq, false AS live FROM handoffs WHERE recipient_id = ${recipient} AND delivery_state = '${st}' AND (not_before IS NULL OR not_before <= ${now})${notExcluded} ORDER BY seq LIMIT 1)`,
        ),
      ].join('\n      UNION ALL ')}
    ) c WHERE ${ownedBy(recipient, deployment)} ORDER BY c.live DESC, c.seq LIMIT 1
  )
  SELECT ${H('h')}, c.rule AS "connectionRule", head.live,
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

/**
 * What a reservation writes, as SQL expressions: parameters of one statement
 * (`reservationParams`), or the columns of a batch's input rows (`x.*`, `nextWorkMany`).
 */
interface ReservationColumns {
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
function reservationParams(r: HeadReservation, p: (value: unknown, type: string) => string): ReservationColumns {
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
function reserveHeadSql(c: ReservationColumns, from: string, at: string, requires: string): string {
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
const reservedColumns = `(SELECT m.revision FROM r_moved m WHERE m.id = nw.id) AS "reservedRevision",
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

type WorkRow = DispatchCandidate & {
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

type ReservedRow = { reservedRevision?: number | null; reservedEventIds?: string[] };

function toWorkItem(row: WorkRow & ReservedRow, reservation?: HeadReservation): WorkItem {
  const { live, uncertainTurn, senderHandle, recipientHandle, recipientSettings, recipientCurrent, attemptId, attemptRequestId, attemptStartedAt, attemptAcceptedAt, reservedRevision, reservedEventIds, ...handoff } = row;
  return {
    handoff,
    live,
    uncertainTurn,
    senderHandle,
    recipient: recipientHandle === null ? null : { handle: recipientHandle, settings: recipientSettings ?? {}, current: recipientCurrent === true },
    attempt: attemptId && attemptRequestId && attemptStartedAt ? { id: attemptId, requestId: attemptRequestId, startedAt: attemptStartedAt, acceptedAt: attemptAcceptedAt } : null,
    ...(reservation && reservedRevision !== null && reservedRevision !== undefined
      ? { reserved: { revision: reservedRevision, attemptId: reservation.attemptId, requestId: reservation.requestId, eventIds: reservedEventIds ?? [] } }
      : {}),
  };
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
 * Enrollment of a batch of handoffs ($1: one JSON object per handoff, `n` its place; $2: the
 * live-turn states). Each look-up is LIMIT 1 (unique anyway), so it stays a per-row index probe
 * rather than a join the planner may hash over the whole agents or handoffs table: a generic
 * plan expects 100 rows from jsonb_to_recordset whatever the batch holds.
 */
export const ENROLL_SQL = `WITH x AS (
     SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(n int, id uuid, project text, sender text, recipient text, session uuid,
       title text, message text, focus text, done_when text, context_summary text, open_questions jsonb, next_steps jsonb,
       due_at timestamptz, idempotency_key text, content_hash text, duplicate_of uuid, state delivery_state, detail text,
       guard boolean, work_state work_state, created_at timestamptz, event text, actor_kind actor_kind, actor_id text,
       token_id uuid, reason text, event_detail jsonb, busy_if_live boolean, busy_state delivery_state, busy_event text,
       busy_actor_kind actor_kind, busy_actor_id text, busy_reason text)
   ), f AS (
     SELECT x.*, p.id AS project_id, s.id AS sender_id, r.id AS recipient_id, r.generation, r.provider, r.delivery_target, r.pool,
       r.deployment, (x.session IS NULL OR EXISTS (SELECT 1 FROM sessions ss WHERE ss.id = x.session AND ss.project_id = p.id)) AS session_ok,
       CASE WHEN x.guard THEN s.id::text || ':' || coalesce(r.id::text || ':' || r.generation, 'project') || ':' || x.content_hash END AS key,
       b.busy IS NOT NULL AS busy
     FROM x
     LEFT JOIN LATERAL (
       SELECT pr.id FROM projects pr JOIN workspaces w ON w.id = pr.workspace_id WHERE w.slug = 'default' AND pr.slug = x.project LIMIT 1
     ) p ON true
     LEFT JOIN LATERAL (SELECT a.id FROM agents a WHERE a.project_id = p.id AND a.handle = x.sender AND a.removed_at IS NULL LIMIT 1) s ON true
     LEFT JOIN LATERAL (
       SELECT a.id, a.generation, a.provider, a.delivery_target, a.pool, a.deployment
       FROM agents a WHERE a.project_id = p.id AND a.handle = x.recipient AND a.removed_at IS NULL LIMIT 1
     ) r ON true
     LEFT JOIN LATERAL (
       SELECT true AS busy FROM handoffs y
       WHERE x.busy_if_live AND y.recipient_id = r.id AND y.delivery_state = ANY($2::delivery_state[]) AND y.attempt_count > 0 LIMIT 1
     ) b ON true
   ), h AS (
     INSERT INTO handoffs (id, project_id, sender_id, recipient_id, recipient_generation, provider, pool, delivery_target, session_id,
       title, message, focus, done_when, context_summary, open_questions, next_steps, due_at, idempotency_key,
       content_hash, in_progress_key, duplicate_of_id, delivery_state, delivery_detail, work_state, revision, created_at, updated_at, settled_at,
       created_by_token_id)
     SELECT f.id, f.project_id, f.sender_id, f.recipient_id, f.generation, f.provider, coalesce(f.pool, ''), f.delivery_target, f.session,
       f.title, f.message, f.focus, f.done_when, f.context_summary,
       ARRAY(SELECT jsonb_array_elements_text(f.open_questions)), ARRAY(SELECT jsonb_array_elements_text(f.next_steps)),
       f.due_at, f.idempotency_key, f.content_hash, f.key, f.duplicate_of, CASE WHEN f.busy THEN f.busy_state ELSE f.state END, f.detail,
       f.work_state, CASE WHEN f.busy THEN 1 ELSE 0 END, f.created_at, f.created_at,
       CASE WHEN f.state = 'DUPLICATE' THEN f.created_at END, f.token_id
     FROM f
     WHERE f.project_id IS NOT NULL AND f.sender_id IS NOT NULL AND f.session_ok AND (f.recipient IS NULL OR f.recipient_id IS NOT NULL)
     ORDER BY f.n
     ON CONFLICT DO NOTHING
     RETURNING *
   ), ev AS (
     INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, token_id, reason, detail, revision, created_at)
     SELECT h.id, NULL::delivery_state, f.state, f.event, f.actor_kind, f.actor_id, f.token_id, f.reason, f.event_detail, 0, h.created_at
     FROM h JOIN f ON f.id = h.id
     UNION ALL
     SELECT h.id, f.state, h.delivery_state, f.busy_event, f.busy_actor_kind, f.busy_actor_id, NULL::uuid, f.busy_reason, NULL::jsonb, 1, h.created_at
     FROM h JOIN f ON f.id = h.id WHERE h.revision = 1
     RETURNING id, handoff_id
   ), evs AS (
     SELECT handoff_id, array_agg(id::text ORDER BY id) AS ids FROM ev GROUP BY handoff_id
   )
   SELECT f.n, f.project_id AS "foundProject", f.sender_id AS "foundSender", f.recipient_id AS "foundRecipient",
     f.provider AS "foundProvider", f.generation AS "foundGeneration", f.deployment AS "foundDeployment",
     f.session_ok AS "foundSession", f.key AS "foundKey",
     (SELECT c.rule FROM connections c WHERE c.from_id = f.sender_id AND c.to_id = f.recipient_id) AS "foundRule",
     (SELECT st.value FROM settings st WHERE st.key = 'connections') AS "foundConnections",
     evs.ids AS "foundEvents", ${H('h')}
   FROM f LEFT JOIN h ON h.id = f.id LEFT JOIN evs ON evs.handoff_id = f.id
   ORDER BY f.n`;

/** Turn ends per statement (transitionBatch). */
const TURN_END_MAX_BATCH = 32;

/**
 * A transition statement as built for one write (`$n` parameters) or for one row of a batch
 * (`x.cN`: columns of the batch's input rows, `jsonb_to_recordset`, each typed as its use says).
 * `shape` lists every choice that changed the text; writes of one shape share one text.
 */
interface BuiltTransition {
  shape: Array<string | number | boolean>;
  text: string;
  /** One write: the statement's parameters. A batch's row: its columns' values (c1, c2, ...). */
  values: unknown[];
}

/**
 * Builds the compare-and-set transition (see HandoffRepository.transition) for one write, or,
 * with `many`, as the body of a statement that applies many writes of the same shape at once:
 * each CTE is then correlated to its input row (`x.n`), and every value comes from the row.
 */
function buildTransition(w: TransitionWrite, many: boolean): BuiltTransition {
  const first = w.steps[0];
  const last = w.steps[w.steps.length - 1];
  if (!first || !last) throw new Error('a transition needs at least one step');
  const n = w.steps.length;
  const values: unknown[] = [];
  const columns: string[] = [];
  /** An expression for `value` as a `type`. */
  const p = (value: unknown, type: string): string => {
    values.push(type === 'jsonb' ? (many ? (value ?? null) : jsonParam(value)) : value);
    if (!many) return `$${values.length}::${type}`;
    columns.push(`c${values.length} ${type}`);
    return `x.c${values.length}`;
  };
  const id = p(w.handoffId, 'uuid');
  const expect = p(w.expectRevision, 'int');
  const from = p(first.from, 'delivery_state');
  const to = p(last.to, 'delivery_state');
  const at = p(w.at, 'timestamptz');
  const steps = p(n, 'int');
  // Correlation to the batch's input row: nothing for one write.
  const fromX = many ? 'x, ' : '';
  const updateFromX = many ? ' FROM x' : '';
  const rowN = (alias: string) => (many ? `${alias}.n, ` : '');
  const joinX = (alias: string) => (many ? ` JOIN x ON x.n = ${alias}.n` : '');
  const sameRow = (alias: string, other: string) => (many ? `${alias}.n = ${other}.n` : 'true');
  const movedForRow = many ? 'SELECT 1 FROM moved WHERE moved.n = x.n' : 'SELECT 1 FROM moved';

  // Every choice below that changes the text (not only the values) adds to `shape`.
  const shape: Array<string | number | boolean> = [many ? 'many' : 'one', n];
  const sets = [`delivery_state = ${to}`, `revision = revision + ${steps}`, `updated_at = ${at}`];
  for (const key of Object.keys(w.patch ?? {}) as Array<keyof HandoffPatch>) {
    const value = w.patch?.[key];
    if (value === undefined) continue;
    const { column, cast } = PATCH_COLUMNS[key];
    shape.push(key);
    sets.push(`${column} = ${p(value, cast)}`);
  }
  for (const counter of w.increment ?? []) {
    const column = COUNTER_COLUMNS[counter];
    shape.push(counter);
    sets.push(`${column} = ${column} + 1`);
  }
  let workFrom = '';
  shape.push('work', w.alsoWork?.result ?? !!w.alsoWork);
  if (w.alsoWork) {
    workFrom = p(w.alsoWork.from, 'work_state[]');
    const hit = `work_state = ANY(${workFrom})`;
    sets.push(
      `work_state = CASE WHEN ${hit} THEN ${p(w.alsoWork.to, 'work_state')} ELSE work_state END`,
      `work_revision = CASE WHEN ${hit} THEN work_revision + 1 ELSE work_revision END`,
      `claim_token = CASE WHEN ${hit} THEN NULL ELSE claim_token END`,
      `lease_expires_at = CASE WHEN ${hit} THEN NULL ELSE lease_expires_at END`,
    );
    const result = w.alsoWork.result;
    if (result === 'succeeded' || result === 'failed') {
      sets.push(`returned_at = CASE WHEN ${hit} THEN ${at} ELSE returned_at END`, `return_outcome = CASE WHEN ${hit} THEN ${p(result, 'text')} ELSE return_outcome END`);
    } else if (result === 'cleared') {
      for (const column of ['returned_at', 'return_outcome', 'result_summary', 'result']) sets.push(`${column} = CASE WHEN ${hit} THEN NULL ELSE ${column} END`);
      sets.push(`result_fact_ids = CASE WHEN ${hit} THEN '{}' ELSE result_fact_ids END`);
    }
  }
  const attemptParam = p(w.insertAttempt?.id ?? w.updateAttempt?.id ?? null, 'uuid');
  const events = w.steps.map(
    (step, i) =>
      `SELECT moved.id, ${p(step.from, 'delivery_state')}, ${p(step.to, 'delivery_state')}, NULL::work_state, NULL::work_state, ${p(step.event.event, 'text')},
          ${p(step.event.actorKind, 'actor_kind')}, ${p(step.event.actorId, 'text')}, ${p(step.event.tokenId ?? null, 'uuid')}, ${p(step.event.reason ?? null, 'text')},
          ${p(step.event.detail, 'jsonb')}, moved.revision - ${n - 1 - i}, ${attemptParam}, ${at} FROM moved${joinX('moved')}`,
  );
  // The work's move, when there is one, is logged after the delivery's, in the same INSERT:
  // separate INSERTs in one statement run in no guaranteed order.
  if (w.alsoWork) {
    const a = w.alsoWork;
    events.push(
      `SELECT moved.id, ${to}, ${to}, before.work_state, ${p(a.to, 'work_state')}, ${p(a.event.event, 'text')},
          ${p(a.event.actorKind, 'actor_kind')}, ${p(a.event.actorId, 'text')}, ${p(a.event.tokenId ?? null, 'uuid')}, ${p(a.event.reason ?? null, 'text')}, NULL::jsonb, moved.revision, NULL::uuid, ${at}
        FROM moved JOIN before ON ${sameRow('before', 'moved')}${joinX('moved')} WHERE before.work_state = ANY(${workFrom})`,
    );
  }
  const fence = w.insertAttempt?.fence;
  const fenceParam = fence === undefined ? null : p(fence.toString(), 'bigint');
  const u = w.updateAttempt;
  shape.push('att', !!w.insertAttempt, fenceParam !== null, !!u, u?.error !== undefined, !!u?.accepted, !!u?.finished, !!u?.observed, !!u?.absentScan);
  shape.push('more', !!w.alsoMoveQueued, !!w.thenNextWork, !!w.thenNextWork?.reserve);
  // A batch's input rows say n >= 0 AND n < TURN_END_MAX_BATCH, which is true, so that the
  // planner expects one of them (a range of unknown selectivity) rather than the 100 it
  // assumes of a set-returning function: it then finds each row's handoff, attempt and queue by
  // index (a nested loop), never by hashing the batch against a sequential scan of the table.
  let sql = `WITH ${many ? `x AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(n int, ${'$COLUMNS'}) WHERE x.n >= 0 AND x.n < ${TURN_END_MAX_BATCH}), ` : ''}before AS (
        SELECT ${rowN('x')}h.work_state FROM ${fromX}handoffs h WHERE h.id = ${id}
      ),${
        fenceParam === null
          ? ''
          : ` fenced AS (
        INSERT INTO agent_turn_fences AS f (agent_id, fence)
        SELECT h.recipient_id, ${fenceParam} FROM ${fromX}handoffs h WHERE h.id = ${id} AND h.recipient_id IS NOT NULL
        ON CONFLICT (agent_id) DO UPDATE SET fence = EXCLUDED.fence WHERE f.fence <= EXCLUDED.fence
        RETURNING agent_id
      ),`
      } moved AS (
        UPDATE handoffs SET ${sets.join(', ')}${updateFromX}
        WHERE handoffs.id = ${id} AND (${expect} IS NULL OR handoffs.revision = ${expect}) AND handoffs.delivery_state = ${from}${
          fenceParam === null ? '' : ' AND EXISTS (SELECT 1 FROM fenced WHERE fenced.agent_id = handoffs.recipient_id)'
        }
        RETURNING ${rowN('x')}handoffs.id, handoffs.revision
      ), ev AS (
        INSERT INTO handoff_events (handoff_id, from_state, to_state, work_from_state, work_to_state, event, actor_kind, actor_id, token_id, reason, detail,
          revision, attempt_id, created_at)
        ${events.join(' UNION ALL ')}
        RETURNING id, handoff_id
      )`;
  if (w.insertAttempt) {
    const a = w.insertAttempt;
    sql += `, att AS (
        INSERT INTO delivery_attempts (id, handoff_id, number, request_id, status, worker_id, delivery_target, started_at, fence)
        SELECT ${p(a.id, 'uuid')}, moved.id, ${p(a.number, 'int')}, ${p(a.requestId, 'uuid')}, 'sending', ${p(a.workerId, 'text')}, ${p(a.deliveryTarget, 'text')}, ${at}, ${fenceParam ?? 'NULL::bigint'}
        FROM moved${joinX('moved')}
      )`;
  }
  if (u) {
    const attemptId = p(u.id, 'uuid');
    const attemptSets = [`status = ${p(u.status, 'attempt_status')}`];
    if (u.error !== undefined) attemptSets.push(`error = ${p(u.error, 'text')}`);
    if (u.accepted) attemptSets.push(`accepted_at = COALESCE(accepted_at, ${at})`);
    if (u.finished) attemptSets.push(`finished_at = ${at}`);
    if (u.observed) attemptSets.push(`last_observed_at = ${at}`);
    if (u.absentScan) attemptSets.push('absent_scans = absent_scans + 1', `first_absent_at = COALESCE(first_absent_at, ${at})`);
    sql += `, upd AS (
        UPDATE delivery_attempts SET ${attemptSets.join(', ')}${updateFromX}
        WHERE delivery_attempts.id = ${attemptId} AND EXISTS (${movedForRow})
      )`;
  }
  if (w.alsoMoveQueued) {
    const o = w.alsoMoveQueued;
    const queuedFrom = p(o.from, 'delivery_state');
    const queuedTo = p(o.to, 'delivery_state');
    const recipient = p(o.recipientId, 'uuid');
    sql += `, queued AS (
        UPDATE handoffs SET delivery_state = ${queuedTo}, revision = handoffs.revision + 1, updated_at = ${at}${updateFromX}
        WHERE handoffs.recipient_id = ${recipient} AND handoffs.delivery_state = ${queuedFrom} AND handoffs.id <> ${id}
          AND EXISTS (${movedForRow})
        RETURNING ${rowN('x')}handoffs.id, handoffs.revision
      ), queued_ev AS (
        INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, reason, revision, created_at)
        SELECT queued.id, ${queuedFrom}, ${queuedTo}, ${p(o.event.event, 'text')}, ${p(o.event.actorKind, 'actor_kind')},
          ${p(o.event.actorId, 'text')}, ${p(o.event.reason ?? null, 'text')}, queued.revision, ${at} FROM queued${joinX('queued')}
        RETURNING id, handoff_id
      )`;
  }
  const queuedIds = w.alsoMoveQueued ? ` UNION ALL SELECT qe.id FROM queued_ev qe JOIN queued q ON q.id = qe.handoff_id WHERE ${sameRow('q', 'moved')}` : '';
  const eventIds = `ARRAY(SELECT e.id::text FROM (SELECT ev.id FROM ev WHERE ev.handoff_id = moved.id${queuedIds}) e ORDER BY e.id)`;
  if (!w.thenNextWork) {
    sql += ` SELECT ${rowN('moved')}moved.revision, ${eventIds} AS "eventIds" FROM moved`;
  } else {
    const then = w.thenNextWork;
    const head = nextWorkSql(p(then.recipientId, 'uuid'), p(then.now, 'timestamptz'), p(then.deployment, 'text'), id);
    sql += many ? `, nw AS (SELECT x.n, w.* FROM x LEFT JOIN LATERAL (${head}) w ON true)` : `, nw AS (${head})`;
    // The next head is reserved only when this turn's end committed (and is never the ended one).
    if (then.reserve) {
      const movedToo = many ? 'SELECT 1 FROM moved WHERE moved.n = nw.n' : 'SELECT 1 FROM moved';
      sql += `, ${reserveHeadSql(reservationParams(then.reserve, p), many ? 'nw JOIN x ON x.n = nw.n' : 'nw', at, ` AND EXISTS (${movedToo}) AND nw.id <> ${id}`)}`;
    }
    // Named apart from the next handoff's own columns (`revision` among them).
    sql += ` SELECT ${many ? 'moved.n AS "batchN", ' : ''}moved.revision AS "movedRevision", ${eventIds} AS "movedEventIds", nw.*${then.reserve ? `, ${reservedColumns}` : ''}
      FROM moved LEFT JOIN nw ON ${sameRow('nw', 'moved')}`;
  }
  return { shape, text: many ? sql.replace('$COLUMNS', columns.join(', ')) : sql, values };
}

/** A turn end's row: the moved handoff's revision and events, and the next head's columns (all null when there is none). */
type TurnEndRow = Partial<WorkRow> & ReservedRow & { movedRevision: number; movedEventIds: string[]; n?: number };

function toTurnEnd(row: TurnEndRow, w: TransitionWrite): TransitionWritten {
  const { movedRevision, movedEventIds, n: _n, ...next } = row;
  return { revision: movedRevision, eventIds: movedEventIds, nextWork: next.id ? toWorkItem(next as WorkRow & ReservedRow, w.thenNextWork?.reserve) : null };
}

export class HandoffRepository {
  private readonly enrollments: GroupCommit<{ e: Enrollment; event: EventWrite }, EnrollOutcome>;
  private readonly reservingLookUps: GroupCommit<ReservingLookUp, WorkItem | null>;
  private readonly turnEnds: GroupCommit<TransitionWrite, TransitionWritten | null>;

  constructor(private readonly pool: Queryable) {
    // A send answered 503 may or may not have been recorded (docs/ERRORS.md), so one past its
    // deadline is answered then; the worker's batched reads and ends wait for their statement.
    this.enrollments = batchedStatement(this.pool, (items) => this.enrollMany(items), { maxBatch: ENROLL_MAX_BATCH, inFlightAtDeadline: 'answer' });
    this.reservingLookUps = batchedStatement(this.pool, (items) => this.nextWorkMany(items), { maxBatch: LOOK_UP_MAX_BATCH, inFlightAtDeadline: 'wait' });
    this.turnEnds = batchedStatement(this.pool, (items) => this.transitionBatch(items), { maxBatch: TURN_END_MAX_BATCH, inFlightAtDeadline: 'wait' });
  }

  /**
   * Runs `fn` with this repository bound to one connection inside a read-only REPEATABLE READ
   * transaction: every read it makes sees the same snapshot (a handoff's row, attempts and
   * timeline agree, whatever commits meanwhile). On a connection that is already a client, runs
   * `fn` on it as it is.
   */
  async snapshot<T>(fn: (repo: HandoffRepository) => Promise<T>): Promise<T> {
    const pool = this.pool as Partial<pg.Pool>;
    if (typeof pool.connect !== 'function') return fn(this);
    const client = await pool.connect();
    let broken = false;
    // A checked-out client has no listener of the pool's: a connection that ends meanwhile (a
    // Postgres restart, a dropped link, or BoundedClient ending one whose reply timed out) would
    // emit an 'error' nobody handles, and that ends the process. The statement fails anyway.
    const onError = () => {
      broken = true;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const result = await fn(new HandoffRepository(client));
      await client.query('COMMIT');
      return result;
    } catch (err) {
      // A connection that cannot even roll back is closed rather than reused.
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw err;
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  /**
   * Every query here runs as a named prepared statement: the hot-path statements are long CTEs
   * whose planning costs more than their execution when re-planned on every call.
   */
  private q<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<pg.QueryResult<T>> {
    return prepared<T>(this.pool, text, values);
  }

  /**
   * Enrolls a handoff in one statement: resolves the project and both agents by handle,
   * snapshots the recipient (generation, provider, session), inserts the row and its creation
   * event. Inserts nothing on any unique conflict (idempotency key, or an identical handoff
   * still in progress); the outcome says which agents and key were involved. Enrollments of
   * the same moment share the statement (GroupCommit): each row is resolved, checked and
   * inserted on its own, as if alone, and one commit covers them.
   */
  enroll(e: Enrollment, event: EventWrite): Promise<EnrollOutcome> {
    return this.enrollments.submit({ e, event });
  }

  private async enrollMany(items: Array<{ e: Enrollment; event: EventWrite }>): Promise<EnrollOutcome[]> {
    type Row = HandoffRecord & {
      n: number;
      foundProject: string | null;
      foundSender: string | null;
      foundRecipient: string | null;
      foundProvider: ProviderName | null;
      foundGeneration: number | null;
      foundDeployment: string | null;
      foundSession: boolean;
      foundKey: string | null;
      foundRule: 'allow' | 'block' | null;
      foundConnections: unknown;
      foundEvents: string[] | null;
    };
    const input = items.map(({ e, event }, n) => ({
      n,
      id: e.id,
      project: e.projectSlug,
      sender: e.fromHandle,
      recipient: e.toHandle,
      session: e.sessionId,
      title: e.title,
      message: e.message,
      focus: e.focus,
      done_when: e.doneWhen,
      context_summary: e.contextSummary,
      open_questions: e.openQuestions,
      next_steps: e.nextSteps,
      due_at: e.dueAt,
      idempotency_key: e.idempotencyKey,
      content_hash: e.contentHash,
      duplicate_of: e.duplicateOfId,
      state: e.deliveryState,
      detail: e.deliveryDetail,
      guard: e.guardDuplicates,
      work_state: e.workState,
      created_at: e.createdAt,
      event: event.event,
      actor_kind: event.actorKind,
      actor_id: event.actorId,
      token_id: event.tokenId ?? null,
      reason: event.reason ?? null,
      event_detail: event.detail ?? null,
      busy_if_live: e.busyIfLive !== undefined,
      busy_state: e.busyIfLive?.to ?? 'BUSY',
      busy_event: e.busyIfLive?.event.event ?? null,
      busy_actor_kind: e.busyIfLive?.event.actorKind ?? 'system',
      busy_actor_id: e.busyIfLive?.event.actorId ?? null,
      busy_reason: e.busyIfLive?.event.reason ?? null,
    }));
    const { rows } = await this.q<Row>(
      ENROLL_SQL,
      [JSON.stringify(input), LIVE_TURN_STATES],
    );
    if (rows.length !== items.length) throw new Error(`enrollment returned ${rows.length} rows for ${items.length} handoffs`);
    return rows.map((row) => {
      const { n: _n, foundProject, foundSender, foundRecipient, foundProvider, foundGeneration, foundDeployment, foundSession, foundKey, foundRule, foundConnections, foundEvents, ...h } = row;
      return {
        projectId: foundProject,
        senderId: foundSender,
        recipientId: foundRecipient,
        recipientProvider: foundProvider,
        recipientGeneration: foundGeneration,
        recipientDeployment: foundDeployment,
        sessionFound: foundSession === true,
        inProgressKey: foundKey,
        connectionRule: foundRule,
        connectionsSetting: foundConnections,
        handoff: h.id ? h : null,
        eventIds: foundEvents ?? [],
      };
    });
  }

  /** The in-progress original holding `key`, if it is still in progress. */
  async findByInProgressKey(key: string): Promise<HandoffRecord | null> {
    const { rows } = await this.q<HandoffRecord>(`SELECT ${H('h')} FROM handoffs h WHERE h.in_progress_key = $1`, [key]);
    return rows[0] ?? null;
  }

  /**
   * The compare-and-set transition: moves the row only if it is still in the first step's
   * `from` at `expectRevision`, bumps the revision once per step, and appends one event per
   * step (and the attempt changes) in the same statement. Returns the new revision and the ids
   * of every event row the statement appended (in id order), or null when the row was not in
   * the expected state (nothing was written). The ends of turns (`thenNextWork`) of the same
   * moment share one statement (GroupCommit, `transitionBatch`), each row applied as if alone.
   */
  transition(w: TransitionWrite): Promise<TransitionWritten | null> {
    if (w.thenNextWork) return this.turnEnds.submit(w);
    return this.transitionAlone(w);
  }

  private async transitionAlone(w: TransitionWrite): Promise<TransitionWritten | null> {
    const built = buildTransition(w, false);
    const sql = sameTextPerShape(built.shape, built.text, built.values.length);
    if (!w.thenNextWork) {
      const { rows } = await this.q<TransitionWritten>(sql, built.values);
      return rows[0] ?? null;
    }
    const { rows } = await this.q<TurnEndRow>(sql, built.values);
    return rows[0] ? toTurnEnd(rows[0], w) : null;
  }

  /**
   * Turn ends of one moment: writes of the same shape, each of its own handoff and recipient,
   * go in one statement (a write whose handoff or recipient is already in a group starts
   * another, so no row of a statement can meet another's); the groups run side by side.
   */
  private async transitionBatch(items: TransitionWrite[]): Promise<Array<TransitionWritten | null>> {
    if (items.length === 1) return [await this.transitionAlone(items[0]!)];
    const groups: Array<{ key: string; built: BuiltTransition[]; at: number[]; taken: Set<string> }> = [];
    items.forEach((w, i) => {
      const built = buildTransition(w, true);
      const key = built.shape.join('|');
      const ids = [w.handoffId, `r:${w.thenNextWork?.recipientId ?? w.handoffId}`];
      const group = groups.find((g) => g.key === key && g.built.length < TURN_END_MAX_BATCH && !ids.some((x) => g.taken.has(x)));
      if (group) {
        group.built.push(built);
        group.at.push(i);
        for (const x of ids) group.taken.add(x);
      } else groups.push({ key, built: [built], at: [i], taken: new Set(ids) });
    });
    const out: Array<TransitionWritten | null> = new Array(items.length).fill(null);
    await Promise.all(
      groups.map(async (g) => {
        if (g.built.length === 1) {
          out[g.at[0]!] = await this.transitionAlone(items[g.at[0]!]!);
          return;
        }
        const first = g.built[0]!;
        const sql = sameTextPerShape(first.shape, first.text, first.values.length);
        const input = g.built.map((b, n) => {
          const row: Record<string, unknown> = { n };
          b.values.forEach((v, k) => {
            row[`c${k + 1}`] = v;
          });
          return row;
        });
        const { rows } = await this.q<TurnEndRow & { batchN: number }>(sql, [JSON.stringify(input)]);
        for (const { batchN, ...row } of rows) {
          const i = g.at[batchN]!;
          out[i] = toTurnEnd(row, items[i]!);
        }
      }),
    );
    return out;
  }

  async findById(id: string): Promise<HandoffRecord | null> {
    const { rows } = await this.q<HandoffRecord>(`SELECT ${H('h')} FROM handoffs h WHERE h.id = $1`, [id]);
    return rows[0] ?? null;
  }

  async findView(projectId: string, id: string): Promise<HandoffView | null> {
    const { rows } = await this.q<HandoffView>(
      `SELECT ${VIEW_COLUMNS} FROM ${VIEW_FROM} WHERE h.id = $1 AND h.project_id = $2`,
      [id, projectId],
    );
    return rows[0] ?? null;
  }

  async findByIdempotencyKey(senderId: string, key: string): Promise<HandoffRecord | null> {
    const { rows } = await this.q<HandoffRecord>(
      `SELECT ${H('h')} FROM handoffs h WHERE h.sender_id = $1 AND h.idempotency_key = $2`,
      [senderId, key],
    );
    return rows[0] ?? null;
  }

  /** Newest first; `beforeSeq` continues a page. */
  async list(f: HandoffFilter): Promise<HandoffView[]> {
    const params: unknown[] = [];
    const where = filterSql(f, params);
    where.push(visibleSql(f.viewer, params));
    if (f.beforeSeq !== undefined) {
      params.push(f.beforeSeq.toString());
      where.push(`h.seq < $${params.length}::bigint`);
    }
    params.push(f.limit);
    const { rows } = await this.q<HandoffView>(
      `SELECT ${VIEW_COLUMNS} FROM ${VIEW_FROM} WHERE ${where.join(' AND ')} ORDER BY h.seq DESC LIMIT $${params.length}`,
      params,
    );
    return rows;
  }

  /**
   * How many handoffs match the filter's project, recipient, sender and states but are hidden
   * from its viewer (0 for an all-owners view, without a query). For an admin's narrowed view
   * only: the API never tells an agent how much it may not see.
   */
  async countHidden(f: Omit<HandoffFilter, 'limit' | 'beforeSeq'>): Promise<number> {
    if (f.viewer.allOwners) return 0;
    const params: unknown[] = [];
    const where = filterSql(f, params);
    // IS NOT TRUE: the rule compares with a NULL agent or token id, which yields NULL, not false.
    where.push(`(${visibleSql(f.viewer, params)}) IS NOT TRUE`);
    const { rows } = await this.q<{ n: number }>(`SELECT count(*)::int AS n FROM handoffs h WHERE ${where.join(' AND ')}`, params);
    return rows[0]?.n ?? 0;
  }

  async countByState(projectId: string, viewer: Viewer): Promise<Map<DeliveryState, number>> {
    const params: unknown[] = [projectId];
    const { rows } = await this.q<{ state: DeliveryState; n: number }>(
      `SELECT h.delivery_state AS state, count(*)::int AS n FROM handoffs h WHERE h.project_id = $1 AND ${visibleSql(viewer, params)} GROUP BY h.delivery_state`,
      params,
    );
    return new Map(rows.map((r) => [r.state, r.n]));
  }

  async attempts(handoffId: string): Promise<AttemptRecord[]> {
    const { rows } = await this.q<AttemptRecord>(
      `SELECT ${ATTEMPT_COLUMNS}
       FROM delivery_attempts WHERE handoff_id = $1 ORDER BY number`,
      [handoffId],
    );
    return rows;
  }

  async events(handoffId: string): Promise<EventRecord[]> {
    const { rows } = await this.q<EventRecord>(
      `SELECT ${EVENT_COLUMNS}
       FROM handoff_events WHERE handoff_id = $1 ORDER BY id`,
      [handoffId],
    );
    return rows;
  }

  /** The attempt a transition acts on: the newest one. */
  async latestAttempt(handoffId: string): Promise<AttemptRecord | null> {
    const { rows } = await this.q<AttemptRecord>(
      `SELECT ${ATTEMPT_COLUMNS}
       FROM delivery_attempts WHERE handoff_id = $1 ORDER BY number DESC LIMIT 1`,
      [handoffId],
    );
    return rows[0] ?? null;
  }

  /**
   * The agent's next piece of work: first a turn that may be live (oldest first), else the
   * oldest handoff that may start an attempt now; with its sender, recipient, connection rule
   * and (for a live turn) newest attempt. Only the holder of the agent's turn lock calls this.
   * null when the agent belongs to another deployment than `deployment`: its turn lock lives in
   * that deployment's Redis, so no lock this caller holds entitles it to the agent's turns.
   */
  async nextWork(recipientId: string, now: Date, deployment: string, reserve?: HeadReservation): Promise<WorkItem | null> {
    if (!reserve) {
      const { rows } = await this.q<WorkRow>(NEXT_WORK_SQL, [recipientId, now, deployment]);
      const row = rows[0];
      return row ? toWorkItem(row) : null;
    }
    // The reserving look-ups of many agents' runs starting together (a wake job's drainer
    // starts as many as it has slots) share one statement (GroupCommit).
    return this.reservingLookUps.submit({ recipientId, now, deployment, reserve });
  }

  /**
   * Reserving look-ups of several agents in one statement: each row's head is read and
   * reserved exactly as `nextWork` does for one (reserveHeadSql is set-based), one commit.
   */
  private async nextWorkMany(items: ReservingLookUp[]): Promise<Array<WorkItem | null>> {
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
    const { rows } = await this.q<WorkRow & ReservedRow & { n: number }>(NEXT_WORK_MANY_SQL, [JSON.stringify(input)]);
    const byN = new Map(rows.map((r) => [r.n, r]));
    return items.map((it, n) => {
      const row = byN.get(n);
      if (!row || !row.id) return null;
      const { n: _n, ...work } = row;
      return toWorkItem(work, it.reserve);
    });
  }

  /**
   * When the recipient next has work: 'now' if something is dispatchable or in flight, the
   * earliest not_before otherwise, or null when nothing is open (or the agent belongs to
   * another deployment than `deployment`).
   */
  async nextWorkAt(recipientId: string, now: Date, deployment: string): Promise<'now' | Date | null> {
    const { rows } = await this.q<{ due: boolean; at: Date | null }>(NEXT_WORK_AT_SQL, [recipientId, now, deployment]);
    const row = rows[0];
    if (!row) return null;
    return row.due ? 'now' : row.at;
  }

  /**
   * Sends the one deadline reminder each overdue, still-open handoff gets: marks it and
   * writes a notification for its sender in the same statement. The mark is conditional, so
   * concurrent sweeps remind once. Returns the reminded handoff ids.
   */
  async sendDueReminders(now: Date, limit: number): Promise<string[]> {
    const { rows } = await this.q<{ id: string }>(
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

  async notificationsFor(handoffId: string): Promise<NotificationRecord[]> {
    const { rows } = await this.q<NotificationRecord>(
      `SELECT id, handoff_id AS "handoffId", agent_id AS "agentId", kind, text, created_at AS "createdAt", read_at AS "readAt"
       FROM notifications WHERE handoff_id = $1 ORDER BY created_at`,
      [handoffId],
    );
    return rows;
  }

  /** An agent's notifications, newest first. */
  async notificationsForAgent(agentId: string, limit: number, viewer: Viewer): Promise<Array<NotificationRecord & { handoffTitle: string | null }>> {
    const params: unknown[] = [agentId, limit];
    const { rows } = await this.q<NotificationRecord & { handoffTitle: string | null }>(
      `SELECT n.id, n.handoff_id AS "handoffId", n.agent_id AS "agentId", n.kind, n.text, n.created_at AS "createdAt",
         n.read_at AS "readAt", h.title AS "handoffTitle"
       FROM notifications n JOIN handoffs h ON h.id = n.handoff_id
       WHERE n.agent_id = $1 AND ${visibleSql(viewer, params)} ORDER BY n.created_at DESC LIMIT $2`,
      params,
    );
    return rows;
  }

  /**
   * Recipients of `deployment` with open push work (the reconciler's sweep): dispatchable now,
   * or with a turn that may be live (`live`). Bounded by `limit`, oldest work first; agents of other
   * deployments neither appear nor use up the batch. A scan of handoffs_open_work_idx: only open
   * handoffs, however many settled ones the table holds.
   */
  async recipientsWithOpenWork(now: Date, limit: number, deployment: string): Promise<Array<{ recipientId: string; provider: ProviderName; pool: string; live: boolean }>> {
    const { rows } = await this.q<{ recipientId: string; provider: ProviderName; pool: string; live: boolean }>(
      `SELECT open.recipient_id AS "recipientId", open.provider, open.pool, open.live FROM (
         SELECT recipient_id, provider, pool, min(seq) AS first_seq,
           bool_or(delivery_state IN (${stateList(LIVE_TURN_STATES)}) AND attempt_count > 0) AS live FROM handoffs
         WHERE recipient_id IS NOT NULL AND provider IS NOT NULL AND provider <> 'manual'
           AND ((delivery_state IN (${stateList(LIVE_TURN_STATES)}) AND attempt_count > 0)
             OR (delivery_state IN (${stateList(DISPATCHABLE_STATES)}) AND (not_before IS NULL OR not_before <= $1)))
         GROUP BY recipient_id, provider, pool
       ) open JOIN agents r ON r.id = open.recipient_id AND r.deployment = $3
       ORDER BY open.first_seq LIMIT $2`,
      [now, limit, deployment],
    );
    return rows;
  }
}
