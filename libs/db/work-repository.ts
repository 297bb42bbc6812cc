import type { Viewer } from '../domain/visibility.ts';
import { visibleSql } from './visible-sql.ts';
import { prepared } from './prepared.ts';
import type pg from 'pg';
import { SETTLED_STATES, type DeliveryState } from '../domain/delivery-states.ts';
import { ACTIVE_WORK_STATES, CLAIMABLE_WORK_STATES, type WorkState } from '../domain/work-states.ts';
import { VIEW_COLUMNS, VIEW_FROM } from './handoff-sql/columns.ts';
import type { EventWrite, Queryable } from './handoff-repository.ts';
import type { HandoffView } from './records.ts';

/** Work columns a work move may also set; `undefined` leaves a column alone. */
export interface WorkPatch {
  claimToken?: string | null;
  claimedById?: string | null;
  leaseExpiresAt?: Date | null;
  resultSummary?: string | null;
  result?: unknown;
  returnOutcome?: string | null;
  resultFactIds?: string[];
  returnedAt?: Date | null;
  workResolution?: string | null;
  closeNote?: string | null;
}

const COLUMNS: Record<keyof WorkPatch, { column: string; cast: string }> = {
  claimToken: { column: 'claim_token', cast: 'text' },
  claimedById: { column: 'claimed_by_id', cast: 'uuid' },
  leaseExpiresAt: { column: 'lease_expires_at', cast: 'timestamptz' },
  resultSummary: { column: 'result_summary', cast: 'text' },
  result: { column: 'result', cast: 'jsonb' },
  returnOutcome: { column: 'return_outcome', cast: 'text' },
  resultFactIds: { column: 'result_fact_ids', cast: 'uuid[]' },
  returnedAt: { column: 'returned_at', cast: 'timestamptz' },
  workResolution: { column: 'work_resolution', cast: 'text' },
  closeNote: { column: 'close_note', cast: 'text' },
};

export interface WorkWrite {
  handoffId: string;
  from: WorkState;
  to: WorkState;
  /** The work revision the writer read (compare-and-set). */
  expectWorkRevision: number;
  at: Date;
  event: EventWrite;
  patch?: WorkPatch;
  /** +1 to the work attempt (a new claim). */
  newAttempt?: boolean;
  /** The claim must still be this one (fences a writer whose lease ran out). */
  claimToken?: string;
  /** The delivery moves too, in the same statement (e.g. a pull claim: WAITING -> ACCEPTED). */
  delivery?: { from: DeliveryState; to: DeliveryState; expectRevision: number; event: EventWrite };
  /**
   * The request that makes the move, remembered in the same statement (`work_requests`, keyed
   * by `claimToken`, which the move must then also name): the move and the record of it commit
   * together, so a replay is answered from it even when this statement's reply was lost.
   */
  remember?: { action: string; bodyHash: string };
}

export interface WorkMoved {
  workRevision: number;
  workAttempt: number;
  revision: number;
  deliveryState: DeliveryState;
  /** The ids of the event rows the move appended, in id order. */
  eventIds: string[];
}

/** A fixed list of work states as SQL literals (enum values from libs/domain, never from input). */
const workStateList = (states: readonly WorkState[]) => states.map((st) => `'${st}'`).join(', ');
/** What is still being worked on (the board), and what is still someone's to do (the inbox). */
const ACTIVE_WORK_SQL = workStateList(ACTIVE_WORK_STATES);
const TO_DO_WORK_SQL = workStateList([...CLAIMABLE_WORK_STATES, 'claimed']);
const CLAIMABLE_WORK_SQL = workStateList(CLAIMABLE_WORK_STATES);

/** SQL for the work of a handoff (claims, returns, closes) and remembered requests. */
export class WorkRepository {
  constructor(private readonly pool: Queryable) {}

  private q<T extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<T>> {
    return prepared<T>(this.pool, text, values);
  }

  /**
   * Moves the work if it is still `from` at `expectWorkRevision` (and, when given, still held
   * by `claimToken`, and the delivery still where the writer read it), bumping the work
   * revision and appending the work event (and the delivery event) in one statement; with
   * `remember`, the request (its body hash and the new work revision) goes into `work_requests`
   * in that statement too. Returns null when nothing matched (nothing written).
   */
  async move(w: WorkWrite): Promise<WorkMoved | null> {
    const params: unknown[] = [w.handoffId, w.expectWorkRevision, w.from, w.to, w.at];
    const p = (v: unknown) => {
      params.push(v);
      return `$${params.length}`;
    };
    const sets = ['work_state = $4::work_state', 'work_revision = work_revision + 1', 'updated_at = $5'];
    const where = ['id = $1', 'work_revision = $2', 'work_state = $3::work_state'];
    for (const key of Object.keys(w.patch ?? {}) as Array<keyof WorkPatch>) {
      const value = w.patch?.[key];
      if (value === undefined) continue;
      const { column, cast } = COLUMNS[key];
      sets.push(`${column} = ${p(cast === 'jsonb' ? (value === null ? null : JSON.stringify(value)) : value)}::${cast}`);
    }
    if (w.newAttempt) sets.push('work_attempt = work_attempt + 1');
    if (w.claimToken !== undefined) where.push(`claim_token = ${p(w.claimToken)}`);
    if (w.delivery) {
      sets.push(`delivery_state = ${p(w.delivery.to)}::delivery_state`, 'revision = revision + 1');
      where.push(`delivery_state = ${p(w.delivery.from)}::delivery_state`, `revision = ${p(w.delivery.expectRevision)}`);
      if (SETTLED_STATES.has(w.delivery.to)) {
        sets.push('settled_at = $5', 'in_progress_key = NULL');
      } else {
        sets.push('settled_at = NULL');
      }
    }
    const e = w.event;
    // One INSERT for both rows, work move first (with the delivery state it happened in): the
    // event ids keep that order.
    const deliveryThen = w.delivery ? `${p(w.delivery.from)}::delivery_state` : 'delivery_state';
    const eventRows = [
      `SELECT id, ${deliveryThen}, ${deliveryThen}, $3::work_state, $4::work_state, ${p(e.event)}, ${p(e.actorKind)}::actor_kind, ${p(e.actorId)},
          ${p(e.tokenId ?? null)}::uuid, ${p(e.reason ?? null)}, ${p(e.detail === undefined ? null : JSON.stringify(e.detail))}::jsonb, revision, $5::timestamptz FROM moved`,
    ];
    if (w.delivery) {
      const d = w.delivery;
      eventRows.push(
        `SELECT id, ${p(d.from)}::delivery_state, ${p(d.to)}::delivery_state, NULL::work_state, NULL::work_state, ${p(d.event.event)}, ${p(d.event.actorKind)}::actor_kind,
          ${p(d.event.actorId)}, ${p(d.event.tokenId ?? null)}::uuid, ${p(d.event.reason ?? null)}, NULL::jsonb, revision, $5::timestamptz FROM moved`,
      );
    }
    if (w.remember && w.claimToken === undefined) throw new Error('a remembered work request needs its claim token');
    // A data-modifying CTE runs to completion whether or not the outer query reads it.
    const remember = w.remember
      ? `, remembered AS (
        INSERT INTO work_requests (handoff_id, action, claim_token, body_hash, response, created_at)
        SELECT id, ${p(w.remember.action)}, ${p(w.claimToken)}, ${p(w.remember.bodyHash)}, jsonb_build_object('workRevision', work_revision), $5::timestamptz FROM moved
        ON CONFLICT DO NOTHING
      )`
      : '';
    let sql = `WITH moved AS (
        UPDATE handoffs SET ${sets.join(', ')} WHERE ${where.join(' AND ')}
        RETURNING id, work_revision, work_attempt, revision, delivery_state
      ), ev AS (
        INSERT INTO handoff_events (handoff_id, from_state, to_state, work_from_state, work_to_state, event, actor_kind, actor_id, token_id, reason, detail, revision, created_at)
        ${eventRows.join(' UNION ALL ')}
        RETURNING id
      )${remember}`;
    sql += ` SELECT work_revision AS "workRevision", work_attempt AS "workAttempt", revision, delivery_state AS "deliveryState",
      ARRAY(SELECT e.id::text FROM ev e ORDER BY e.id) AS "eventIds" FROM moved`;
    const { rows } = await this.q<WorkMoved>(sql, params);
    return rows[0] ?? null;
  }

  /** Renews a live claim's lease; false when the claim is gone or its lease already ran out. */
  async heartbeat(handoffId: string, claimToken: string, now: Date, until: Date): Promise<boolean> {
    const { rowCount } = await this.q(
      `UPDATE handoffs SET lease_expires_at = $4 WHERE id = $1 AND claim_token = $2 AND work_state = 'claimed' AND lease_expires_at > $3`,
      [handoffId, claimToken, now, until],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Claimed work whose lease ran out (oldest first). */
  async expiredLeases(
    now: Date,
    limit: number,
  ): Promise<Array<{ id: string; workRevision: number; revision: number; deliveryState: DeliveryState; claimToken: string }>> {
    const { rows } = await this.q<{ id: string; workRevision: number; revision: number; deliveryState: DeliveryState; claimToken: string }>(
      `SELECT id, work_revision AS "workRevision", revision, delivery_state AS "deliveryState", claim_token AS "claimToken"
       FROM handoffs WHERE work_state = 'claimed' AND lease_expires_at <= $1 ORDER BY lease_expires_at LIMIT $2`,
      [now, limit],
    );
    return rows;
  }

  /**
   * What needs the agent: handoffs to it whose work is open or claimed (or, for a plain
   * message, whose delivery is not settled), and unowned work of the project that is open or
   * claimed by it. Oldest first.
   */
  async inbox(projectId: string, agentId: string, limit: number, viewer: Viewer): Promise<HandoffView[]> {
    const params: unknown[] = [projectId, agentId, limit];
    const { rows } = await this.q<HandoffView>(
      `SELECT ${VIEW_COLUMNS} FROM ${VIEW_FROM}
       WHERE h.project_id = $1 AND (
         (h.recipient_id = $2 AND (h.work_state IN (${TO_DO_WORK_SQL}) OR (h.work_state IS NULL AND h.settled_at IS NULL)))
         OR (h.recipient_id IS NULL AND h.recipient_role IS NULL AND (h.work_state IN (${CLAIMABLE_WORK_SQL}) OR (h.work_state = 'claimed' AND h.claimed_by_id = $2))))
         AND ${visibleSql(viewer, params)}
       ORDER BY h.seq LIMIT $3`,
      params,
    );
    return rows;
  }

  /** What the agent sent, newest first. */
  async outbox(projectId: string, agentId: string, limit: number, viewer: Viewer): Promise<HandoffView[]> {
    const params: unknown[] = [projectId, agentId, limit];
    const { rows } = await this.q<HandoffView>(
      `SELECT ${VIEW_COLUMNS} FROM ${VIEW_FROM} WHERE h.project_id = $1 AND h.sender_id = $2 AND ${visibleSql(viewer, params)} ORDER BY h.seq DESC LIMIT $3`,
      params,
    );
    return rows;
  }

  /** Work not yet closed in the project (optionally only where the agent is involved), oldest first. */
  async openWork(projectId: string, agentId: string | null, limit: number, viewer: Viewer): Promise<HandoffView[]> {
    const params: unknown[] = [projectId, agentId, limit];
    const { rows } = await this.q<HandoffView>(
      `SELECT ${VIEW_COLUMNS} FROM ${VIEW_FROM}
       WHERE h.project_id = $1 AND h.work_state IN (${ACTIVE_WORK_SQL})
         AND ($2::uuid IS NULL OR h.sender_id = $2 OR h.recipient_id = $2 OR h.claimed_by_id = $2 OR (h.recipient_id IS NULL AND h.recipient_role IS NULL))
         AND ${visibleSql(viewer, params)}
       ORDER BY h.seq LIMIT $3`,
      params,
    );
    return rows;
  }

  /** The request `move` remembered for this claim token and action (`remember`), if it committed. */
  async remembered(handoffId: string, action: string, claimToken: string): Promise<{ bodyHash: string; response: unknown } | null> {
    const { rows } = await this.q<{ bodyHash: string; response: unknown }>(
      `SELECT body_hash AS "bodyHash", response FROM work_requests WHERE handoff_id = $1 AND action = $2 AND claim_token = $3`,
      [handoffId, action, claimToken],
    );
    return rows[0] ?? null;
  }
}
