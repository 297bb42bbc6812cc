import type pg from 'pg';
import type { DeliveryState } from '../domain/delivery-states.ts';
import type { ActorKind } from '../domain/transitions.ts';
import type { Viewer } from '../domain/visibility.ts';
import type { WorkState } from '../domain/work-states.ts';
import { prepared, type Queryable } from './prepared.ts';
import { visibleSql } from './visible-sql.ts';

/** One row of the event log (handoff_events) with what a follower needs of its handoff. */
export interface LoggedEvent {
  /** handoff_events.id: assigned in the order the rows were written, never reused. */
  readonly id: bigint;
  readonly handoffId: string;
  readonly event: string;
  readonly fromState: DeliveryState | null;
  readonly toState: DeliveryState;
  /** Set when the row moved the work (the delivery state is then unchanged). */
  readonly workFromState: WorkState | null;
  readonly workToState: WorkState | null;
  readonly actorKind: ActorKind;
  readonly actorId: string | null;
  readonly reason: string | null;
  readonly createdAt: Date;
  readonly title: string | null;
  readonly projectId: string;
  /** The visibility fields (libs/domain/visibility.ts `Visible`). */
  readonly senderId: string;
  readonly recipientId: string | null;
  readonly recipientRole: string | null;
  readonly createdByTokenId: string | null;
  readonly senderHandle: string;
  readonly recipientHandle: string | null;
  /**
   * The handoff's work state when this row was read (null: it carries no work). A delivery
   * move's row records no work state, so a follower that first meets a handoff there learns it
   * from this; it may be newer than the row.
   */
  readonly workStateNow: WorkState | null;
}

/**
 * Where the log stands for a reader: the highest id visible now (`top`), and the transactions
 * that are writing to handoff_events right now (`writers`, virtual transaction ids: a
 * transaction has one from its start, before it takes an id or a transaction id). Ids are
 * taken before commit, so an id below `top` that is not visible yet belongs to a transaction
 * still running, and that transaction holds its lock on handoff_events (taken when its
 * statement starts, before it takes an id, kept until it ends: RowExclusiveLock): once none of `writers` is
 * writing any more, every id up to `top` is final. Only writers of this database count, so a
 * long transaction elsewhere (another database, a read-only query) holds nothing up.
 */
export interface LogHorizon {
  readonly top: bigint;
  readonly writers: readonly string[];
}

const COLUMNS = `e.id, e.handoff_id AS "handoffId", e.event, e.from_state AS "fromState", e.to_state AS "toState",
  e.work_from_state AS "workFromState", e.work_to_state AS "workToState", e.actor_kind AS "actorKind", e.actor_id AS "actorId",
  e.reason, e.created_at AS "createdAt", h.title, h.project_id AS "projectId", h.sender_id AS "senderId", h.recipient_id AS "recipientId", h.recipient_role AS "recipientRole",
  h.created_by_token_id AS "createdByTokenId", s.handle AS "senderHandle", r.handle AS "recipientHandle", h.work_state AS "workStateNow"`;
const FROM = `handoff_events e JOIN handoffs h ON h.id = e.handoff_id JOIN agents s ON s.id = h.sender_id LEFT JOIN agents r ON r.id = h.recipient_id`;

/** Reads of the event log for `GET /v1/events` (libs/handoffs/event-feed.ts). */
export class EventLogRepository {
  constructor(private readonly pool: Queryable) {}

  private q<T extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<T>> {
    return prepared<T>(this.pool, text, values);
  }

  /** The highest visible id and who is writing events now (one index lookup, one read of pg_locks). */
  async horizon(): Promise<LogHorizon> {
    const { rows } = await this.q<{ top: bigint; writers: string[] }>(
      `SELECT coalesce((SELECT max(id) FROM handoff_events), 0)::bigint AS top,
         ARRAY(SELECT DISTINCT virtualtransaction FROM pg_locks
           WHERE locktype = 'relation' AND mode = 'RowExclusiveLock' AND relation = 'handoff_events'::regclass
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS writers`,
      [],
    );
    const row = rows[0]!;
    return { top: BigInt(row.top), writers: row.writers };
  }

  /**
   * Every event with `after` < id <= `upTo`, of every project (or of one handoff, on its own
   * index), in id order (at most `limit`).
   */
  async between(after: bigint, upTo: bigint, limit: number, handoffId: string | null = null): Promise<LoggedEvent[]> {
    const one = handoffId === null ? '' : ' AND e.handoff_id = $4::uuid';
    const params: unknown[] = handoffId === null ? [after, upTo, limit] : [after, upTo, limit, handoffId];
    const { rows } = await this.q<LoggedEvent>(
      `SELECT ${COLUMNS} FROM ${FROM} WHERE e.id > $1 AND e.id <= $2${one} ORDER BY e.id LIMIT $3`,
      params,
    );
    return rows;
  }

  /**
   * The events of the project's handoffs the viewer may see (the visibility rule in SQL,
   * libs/db/visible-sql.ts), optionally of one handoff, with `after` < id <= `upTo`, in id order.
   */
  async visibleBetween(
    projectId: string,
    viewer: Viewer,
    handoffId: string | null,
    after: bigint,
    upTo: bigint,
    limit: number,
  ): Promise<LoggedEvent[]> {
    const params: unknown[] = [after, upTo, limit, projectId];
    // One handoff: its own index (handoff_id, id), not a scan of the whole log's tail.
    const one = handoffId === null ? '' : ` AND e.handoff_id = $${params.push(handoffId)}::uuid`;
    const { rows } = await this.q<LoggedEvent>(
      `SELECT ${COLUMNS} FROM ${FROM}
       WHERE e.id > $1 AND e.id <= $2 AND h.project_id = $4${one} AND ${visibleSql(viewer, params)}
       ORDER BY e.id LIMIT $3`,
      params,
    );
    return rows;
  }
}
