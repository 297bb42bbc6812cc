import type pg from 'pg';
import { DISPATCHABLE_STATES, LIVE_TURN_STATES, type DeliveryState } from '../domain/delivery-states.ts';
import type { ActorKind } from '../domain/transitions.ts';
import type { AttemptRecord, AttemptStatus, EventRecord, HandoffRecord, HandoffView, NotificationRecord, ProviderName } from './records.ts';

/** A pool or a client inside a transaction: both run queries the same way. */
export interface Queryable {
  query: pg.Pool['query'];
}

/** The head of an agent's queue, with the sender-to-recipient connection rule (for holds). */
export type DispatchCandidate = HandoffRecord & { connectionRule: 'allow' | 'block' | null };

/** An UNCERTAIN handoff due for a history scan, with the attempt whose write is in doubt. */
export interface UncertainCandidate {
  handoff: HandoffRecord;
  attemptId: string | null;
  requestId: string | null;
  absentScans: number;
  firstAbsentAt: Date | null;
}

/**
 * SQL over the handoffs, delivery_attempts and handoff_events tables. Raw SQL on purpose: the
 * delivery hot path is one round trip per transition (update + event row [+ attempt row] in a
 * single statement). Only libs/handoffs calls the writing functions; nothing here decides
 * whether a move is allowed.
 */

const H = (alias: string) => `
  ${alias}.id, ${alias}.seq, ${alias}.project_id AS "projectId", ${alias}.sender_id AS "senderId",
  ${alias}.recipient_id AS "recipientId", ${alias}.recipient_generation AS "recipientGeneration",
  ${alias}.provider, ${alias}.delivery_target AS "deliveryTarget", ${alias}.session_id AS "sessionId",
  ${alias}.title, ${alias}.message, ${alias}.focus, ${alias}.done_when AS "doneWhen",
  ${alias}.context_summary AS "contextSummary", ${alias}.open_questions AS "openQuestions",
  ${alias}.next_steps AS "nextSteps", ${alias}.due_at AS "dueAt", ${alias}.idempotency_key AS "idempotencyKey",
  ${alias}.content_hash AS "contentHash", ${alias}.duplicate_of_id AS "duplicateOfId",
  ${alias}.delivery_state AS "deliveryState", ${alias}.delivery_detail AS "deliveryDetail", ${alias}.revision,
  ${alias}.attempt_count AS "attemptCount", ${alias}.refusals, ${alias}.error_resends AS "errorResends",
  ${alias}.interrupt_resends AS "interruptResends", ${alias}.not_before AS "notBefore",
  ${alias}.work_state AS "workState", ${alias}.reminder_sent_at AS "reminderSentAt",
  ${alias}.result_summary AS "resultSummary", ${alias}.result,
  ${alias}.created_at AS "createdAt", ${alias}.updated_at AS "updatedAt", ${alias}.settled_at AS "settledAt"`;

const VIEW_COLUMNS = `${H('h')}, s.handle AS "senderHandle", r.handle AS "recipientHandle"`;
const VIEW_FROM = `handoffs h JOIN agents s ON s.id = h.sender_id LEFT JOIN agents r ON r.id = h.recipient_id`;

/** What enrollment writes: the record's own fields, with the recipient known and the work open or absent. */
export type NewHandoff = Pick<
  HandoffRecord,
  | 'id' | 'projectId' | 'senderId' | 'deliveryTarget' | 'title' | 'message' | 'focus' | 'doneWhen' | 'contextSummary'
  | 'openQuestions' | 'nextSteps' | 'dueAt' | 'idempotencyKey' | 'contentHash' | 'duplicateOfId' | 'deliveryState'
  | 'deliveryDetail' | 'createdAt'
> & { recipientId: string; recipientGeneration: number; provider: ProviderName; workState: 'open' | null };

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
}

export type HandoffCounter = 'attemptCount' | 'refusals' | 'errorResends' | 'interruptResends';

export interface AttemptInsert {
  id: string;
  number: number;
  requestId: string;
  workerId: string | null;
  deliveryTarget: string | null;
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

export interface TransitionWrite {
  handoffId: string;
  from: DeliveryState;
  to: DeliveryState;
  expectRevision: number;
  at: Date;
  event: EventWrite;
  patch?: HandoffPatch;
  increment?: readonly HandoffCounter[];
  insertAttempt?: AttemptInsert;
  updateAttempt?: AttemptUpdate;
}

const PATCH_COLUMNS: Record<keyof HandoffPatch, { column: string; cast: string }> = {
  deliveryDetail: { column: 'delivery_detail', cast: 'text' },
  notBefore: { column: 'not_before', cast: 'timestamptz' },
  resultSummary: { column: 'result_summary', cast: 'text' },
  result: { column: 'result', cast: 'jsonb' },
  settledAt: { column: 'settled_at', cast: 'timestamptz' },
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
  /** Only rows with seq below this (newest first paging). */
  beforeSeq?: bigint;
  limit: number;
}

export class HandoffRepository {
  constructor(private readonly pool: Queryable & { connect?: pg.Pool['connect'] }) {}

  /**
   * Runs `fn` in one transaction, holding a transaction-scoped advisory lock on `lockKey`, with a
   * repository bound to that transaction. Used where a read-then-insert must not race (duplicate
   * detection on send).
   */
  async withLock<T>(lockKey: string, fn: (tx: HandoffRepository) => Promise<T>): Promise<T> {
    if (!this.pool.connect) throw new Error('already inside a transaction');
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [lockKey]);
      const result = await fn(new HandoffRepository({ query: client.query.bind(client) as pg.Pool['query'] }));
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  /** The oldest handoff from this sender to this recipient with the same content, still in progress. */
  async findInProgressDuplicate(senderId: string, recipientId: string, contentHash: string): Promise<HandoffRecord | null> {
    const { rows } = await this.pool.query<HandoffRecord>(
      `SELECT ${H('h')} FROM handoffs h
       WHERE h.sender_id = $1 AND h.recipient_id = $2 AND h.content_hash = $3 AND h.settled_at IS NULL
       ORDER BY h.seq LIMIT 1`,
      [senderId, recipientId, contentHash],
    );
    return rows[0] ?? null;
  }

  /**
   * Inserts a handoff and its creation event in one statement. With an idempotency key that
   * the sender already used, inserts nothing and returns null (the caller reads the winner).
   */
  async insert(h: NewHandoff, event: EventWrite): Promise<HandoffRecord | null> {
    const { rows } = await this.pool.query<HandoffRecord>(
      `WITH h AS (
         INSERT INTO handoffs (id, project_id, sender_id, recipient_id, recipient_generation, provider, delivery_target,
           title, message, focus, done_when, context_summary, open_questions, next_steps, due_at, idempotency_key,
           content_hash, duplicate_of_id, delivery_state, delivery_detail, work_state, created_at, updated_at, settled_at)
         VALUES ($1, $2, $3, $4, $5, $6::provider, $7, $8, $9, $10, $11, $12, $13::text[], $14::text[], $15, $16, $17, $18,
           $19::delivery_state, $20, $21::work_state, $22, $22, CASE WHEN $19 = 'DUPLICATE' THEN $22::timestamptz END)
         ON CONFLICT (sender_id, idempotency_key) DO NOTHING
         RETURNING *
       ), ev AS (
         INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, token_id, reason, detail, revision, created_at)
         SELECT id, NULL, delivery_state, $23, $24::actor_kind, $25, $26, $27, $28::jsonb, revision, created_at FROM h
       )
       SELECT ${H('h')} FROM h`,
      [
        h.id, h.projectId, h.senderId, h.recipientId, h.recipientGeneration, h.provider, h.deliveryTarget,
        h.title, h.message, h.focus, h.doneWhen, h.contextSummary, h.openQuestions, h.nextSteps, h.dueAt, h.idempotencyKey,
        h.contentHash, h.duplicateOfId, h.deliveryState, h.deliveryDetail, h.workState, h.createdAt,
        event.event, event.actorKind, event.actorId, event.tokenId ?? null, event.reason ?? null, jsonParam(event.detail),
      ],
    );
    return rows[0] ?? null;
  }

  /**
   * The compare-and-set transition: moves the row only if it is still in `from` at
   * `expectRevision`, bumps the revision, and appends the event (and attempt changes) in the
   * same statement. Returns the new revision, or null when the row was not in the expected
   * state (nothing was written).
   */
  async transition(w: TransitionWrite): Promise<number | null> {
    const params: unknown[] = [w.handoffId, w.expectRevision, w.from, w.to, w.at];
    const p = (value: unknown) => {
      params.push(value);
      return `$${params.length}`;
    };
    const sets = ['delivery_state = $4::delivery_state', 'revision = revision + 1', 'updated_at = $5'];
    for (const key of Object.keys(w.patch ?? {}) as Array<keyof HandoffPatch>) {
      const value = w.patch?.[key];
      if (value === undefined) continue;
      const { column, cast } = PATCH_COLUMNS[key];
      sets.push(`${column} = ${p(cast === 'jsonb' ? jsonParam(value) : value)}::${cast}`);
    }
    for (const counter of w.increment ?? []) {
      const column = COUNTER_COLUMNS[counter];
      sets.push(`${column} = ${column} + 1`);
    }
    const attemptId = w.insertAttempt?.id ?? w.updateAttempt?.id ?? null;
    let sql = `WITH moved AS (
        UPDATE handoffs SET ${sets.join(', ')}
        WHERE id = $1 AND revision = $2 AND delivery_state = $3::delivery_state
        RETURNING id, revision
      ), ev AS (
        INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, token_id, reason, detail, revision, attempt_id, created_at)
        SELECT id, $3::delivery_state, $4::delivery_state, ${p(w.event.event)}, ${p(w.event.actorKind)}::actor_kind, ${p(w.event.actorId)},
          ${p(w.event.tokenId ?? null)}::uuid, ${p(w.event.reason ?? null)}, ${p(jsonParam(w.event.detail))}::jsonb, revision, ${p(attemptId)}::uuid, $5
        FROM moved
      )`;
    if (w.insertAttempt) {
      const a = w.insertAttempt;
      sql += `, att AS (
        INSERT INTO delivery_attempts (id, handoff_id, number, request_id, status, worker_id, delivery_target, started_at)
        SELECT ${p(a.id)}::uuid, id, ${p(a.number)}, ${p(a.requestId)}::uuid, 'sending', ${p(a.workerId)}, ${p(a.deliveryTarget)}, $5 FROM moved
      )`;
    }
    if (w.updateAttempt) {
      const u = w.updateAttempt;
      const attemptSets = [`status = ${p(u.status)}::attempt_status`];
      if (u.error !== undefined) attemptSets.push(`error = ${p(u.error)}`);
      if (u.accepted) attemptSets.push('accepted_at = COALESCE(accepted_at, $5)');
      if (u.finished) attemptSets.push('finished_at = $5');
      if (u.observed) attemptSets.push('last_observed_at = $5');
      if (u.absentScan) attemptSets.push('absent_scans = absent_scans + 1', 'first_absent_at = COALESCE(first_absent_at, $5)');
      sql += `, upd AS (
        UPDATE delivery_attempts SET ${attemptSets.join(', ')}
        WHERE id = ${p(u.id)}::uuid AND EXISTS (SELECT 1 FROM moved)
      )`;
    }
    sql += ' SELECT revision FROM moved';
    const { rows } = await this.pool.query<{ revision: number }>(sql, params);
    return rows[0]?.revision ?? null;
  }

  async findById(id: string): Promise<HandoffRecord | null> {
    const { rows } = await this.pool.query<HandoffRecord>(`SELECT ${H('h')} FROM handoffs h WHERE h.id = $1`, [id]);
    return rows[0] ?? null;
  }

  async findView(projectId: string, id: string): Promise<HandoffView | null> {
    const { rows } = await this.pool.query<HandoffView>(
      `SELECT ${VIEW_COLUMNS} FROM ${VIEW_FROM} WHERE h.id = $1 AND h.project_id = $2`,
      [id, projectId],
    );
    return rows[0] ?? null;
  }

  async findByIdempotencyKey(senderId: string, key: string): Promise<HandoffRecord | null> {
    const { rows } = await this.pool.query<HandoffRecord>(
      `SELECT ${H('h')} FROM handoffs h WHERE h.sender_id = $1 AND h.idempotency_key = $2`,
      [senderId, key],
    );
    return rows[0] ?? null;
  }

  /** Newest first; `beforeSeq` continues a page. */
  async list(f: HandoffFilter): Promise<HandoffView[]> {
    const params: unknown[] = [f.projectId];
    const where = ['h.project_id = $1'];
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
    if (f.beforeSeq !== undefined) {
      params.push(f.beforeSeq.toString());
      where.push(`h.seq < $${params.length}::bigint`);
    }
    params.push(f.limit);
    const { rows } = await this.pool.query<HandoffView>(
      `SELECT ${VIEW_COLUMNS} FROM ${VIEW_FROM} WHERE ${where.join(' AND ')} ORDER BY h.seq DESC LIMIT $${params.length}`,
      params,
    );
    return rows;
  }

  async countByState(projectId: string): Promise<Map<DeliveryState, number>> {
    const { rows } = await this.pool.query<{ state: DeliveryState; n: number }>(
      `SELECT delivery_state AS state, count(*)::int AS n FROM handoffs WHERE project_id = $1 GROUP BY delivery_state`,
      [projectId],
    );
    return new Map(rows.map((r) => [r.state, r.n]));
  }

  async attempts(handoffId: string): Promise<AttemptRecord[]> {
    const { rows } = await this.pool.query<AttemptRecord>(
      `SELECT id, handoff_id AS "handoffId", number, request_id AS "requestId", status, worker_id AS "workerId",
         delivery_target AS "deliveryTarget", error, absent_scans AS "absentScans", started_at AS "startedAt",
         accepted_at AS "acceptedAt", finished_at AS "finishedAt"
       FROM delivery_attempts WHERE handoff_id = $1 ORDER BY number`,
      [handoffId],
    );
    return rows;
  }

  async events(handoffId: string): Promise<EventRecord[]> {
    const { rows } = await this.pool.query<EventRecord>(
      `SELECT id, handoff_id AS "handoffId", from_state AS "fromState", to_state AS "toState", event,
         actor_kind AS "actorKind", actor_id AS "actorId", reason, detail, revision, attempt_id AS "attemptId",
         created_at AS "createdAt"
       FROM handoff_events WHERE handoff_id = $1 ORDER BY id`,
      [handoffId],
    );
    return rows;
  }

  /** The attempt a transition acts on: the newest one. */
  async latestAttempt(handoffId: string): Promise<AttemptRecord | null> {
    const { rows } = await this.pool.query<AttemptRecord>(
      `SELECT id, handoff_id AS "handoffId", number, request_id AS "requestId", status, worker_id AS "workerId",
         delivery_target AS "deliveryTarget", error, absent_scans AS "absentScans", started_at AS "startedAt",
         accepted_at AS "acceptedAt", finished_at AS "finishedAt"
       FROM delivery_attempts WHERE handoff_id = $1 ORDER BY number DESC LIMIT 1`,
      [handoffId],
    );
    return rows[0] ?? null;
  }

  /**
   * The recipient's handoff whose turn may be live (SENDING, ACCEPTED, RUNNING), oldest
   * first. Only the holder of the recipient's turn lock calls this.
   */
  async inFlightFor(recipientId: string): Promise<HandoffRecord | null> {
    const { rows } = await this.pool.query<HandoffRecord>(
      `SELECT ${H('h')} FROM handoffs h
       WHERE h.recipient_id = $1 AND h.delivery_state = ANY($2::delivery_state[])
       ORDER BY h.seq LIMIT 1`,
      [recipientId, LIVE_TURN_STATES],
    );
    return rows[0] ?? null;
  }

  /** The recipient's oldest handoff that may start an attempt now (the head of its queue). */
  async nextDispatchable(recipientId: string, now: Date): Promise<DispatchCandidate | null> {
    const { rows } = await this.pool.query<DispatchCandidate>(
      `SELECT ${H('h')}, c.rule AS "connectionRule" FROM handoffs h
       LEFT JOIN connections c ON c.from_id = h.sender_id AND c.to_id = h.recipient_id
       WHERE h.recipient_id = $1 AND h.delivery_state = ANY($3::delivery_state[])
         AND (h.not_before IS NULL OR h.not_before <= $2)
       ORDER BY h.seq LIMIT 1`,
      [recipientId, now, DISPATCHABLE_STATES],
    );
    return rows[0] ?? null;
  }

  /**
   * When the recipient next has work: 'now' if something is dispatchable or in flight, the
   * earliest not_before otherwise, or null when nothing is open.
   */
  async nextWorkAt(recipientId: string, now: Date): Promise<'now' | Date | null> {
    const { rows } = await this.pool.query<{ due: boolean; at: Date | null }>(
      `SELECT bool_or(not_before IS NULL OR not_before <= $2 OR delivery_state = ANY($3::delivery_state[])) AS due,
              min(not_before) AS at
       FROM handoffs
       WHERE recipient_id = $1 AND (delivery_state = ANY($3::delivery_state[]) OR delivery_state = ANY($4::delivery_state[]))`,
      [recipientId, now, LIVE_TURN_STATES, DISPATCHABLE_STATES],
    );
    const row = rows[0];
    if (!row || row.due === null) return null;
    return row.due ? 'now' : row.at;
  }

  /** HELD handoffs (oldest first) with their connection rule, for re-evaluating their holds. */
  async held(limit: number): Promise<DispatchCandidate[]> {
    const { rows } = await this.pool.query<DispatchCandidate>(
      `SELECT ${H('h')}, c.rule AS "connectionRule" FROM handoffs h
       LEFT JOIN connections c ON c.from_id = h.sender_id AND c.to_id = h.recipient_id
       WHERE h.delivery_state = 'HELD' ORDER BY h.seq LIMIT $1`,
      [limit],
    );
    return rows;
  }

  /** UNCERTAIN handoffs whose next history scan is due, with the attempt in doubt. */
  async uncertainDue(now: Date, limit: number): Promise<UncertainCandidate[]> {
    const { rows } = await this.pool.query<HandoffRecord & { attemptId: string | null; requestId: string | null; absentScans: number | null; firstAbsentAt: Date | null }>(
      `SELECT ${H('h')}, a.id AS "attemptId", a.request_id AS "requestId", a.absent_scans AS "absentScans", a.first_absent_at AS "firstAbsentAt"
       FROM handoffs h
       LEFT JOIN LATERAL (SELECT * FROM delivery_attempts d WHERE d.handoff_id = h.id ORDER BY d.number DESC LIMIT 1) a ON true
       WHERE h.delivery_state = 'UNCERTAIN' AND (h.not_before IS NULL OR h.not_before <= $1)
       ORDER BY h.seq LIMIT $2`,
      [now, limit],
    );
    return rows.map(({ attemptId, requestId, absentScans, firstAbsentAt, ...handoff }) => ({
      handoff,
      attemptId,
      requestId,
      absentScans: absentScans ?? 0,
      firstAbsentAt,
    }));
  }

  /**
   * Sends the one deadline reminder each overdue, still-open handoff gets: marks it and
   * writes a notification for its sender in the same statement. The mark is conditional, so
   * concurrent sweeps remind once. Returns the reminded handoff ids.
   */
  async sendDueReminders(now: Date, limit: number): Promise<string[]> {
    const { rows } = await this.pool.query<{ id: string }>(
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
    const { rows } = await this.pool.query<NotificationRecord>(
      `SELECT id, handoff_id AS "handoffId", agent_id AS "agentId", kind, text, created_at AS "createdAt", read_at AS "readAt"
       FROM notifications WHERE handoff_id = $1 ORDER BY created_at`,
      [handoffId],
    );
    return rows;
  }

  /** An agent's notifications, newest first. */
  async notificationsForAgent(agentId: string, limit: number): Promise<Array<NotificationRecord & { handoffTitle: string | null }>> {
    const { rows } = await this.pool.query<NotificationRecord & { handoffTitle: string | null }>(
      `SELECT n.id, n.handoff_id AS "handoffId", n.agent_id AS "agentId", n.kind, n.text, n.created_at AS "createdAt",
         n.read_at AS "readAt", h.title AS "handoffTitle"
       FROM notifications n JOIN handoffs h ON h.id = n.handoff_id
       WHERE n.agent_id = $1 ORDER BY n.created_at DESC LIMIT $2`,
      [agentId, limit],
    );
    return rows;
  }

  /**
   * Recipients with open push work (the reconciler's sweep): dispatchable now, or with a
   * turn that may be live. Bounded by `limit`, oldest work first.
   */
  async recipientsWithOpenWork(now: Date, limit: number): Promise<Array<{ recipientId: string; provider: ProviderName }>> {
    const { rows } = await this.pool.query<{ recipientId: string; provider: ProviderName }>(
      `SELECT recipient_id AS "recipientId", provider FROM (
         SELECT recipient_id, provider, min(seq) AS first_seq FROM handoffs
         WHERE recipient_id IS NOT NULL AND provider IS NOT NULL AND provider <> 'manual'
           AND (delivery_state = ANY($3::delivery_state[])
             OR (delivery_state = ANY($4::delivery_state[]) AND (not_before IS NULL OR not_before <= $1)))
         GROUP BY recipient_id, provider
       ) open ORDER BY first_seq LIMIT $2`,
      [now, limit, LIVE_TURN_STATES, DISPATCHABLE_STATES],
    );
    return rows;
  }
}
