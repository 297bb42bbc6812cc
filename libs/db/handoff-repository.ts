import type pg from 'pg';
import type { DeliveryState } from '../domain/delivery-states.ts';
import type { Viewer } from '../domain/visibility.ts';
import { GROUP_COMMIT_DEFAULTS } from '../config/component-defaults.ts';
import { batchedStatement } from './batched-statements.ts';
import type { GroupCommit } from './group-commit.ts';
import { attemptByRequestIdOf, attemptsOf, eventsOf, latestAttemptOf } from './handoff-sql/attempts-and-events.ts';
import { enrollMany, type EnrollOutcome, type Enrollment } from './handoff-sql/enroll.ts';
import { findByIdempotencyKey, findByInProgressKey, findHandoff, findHandoffView } from './handoff-sql/find-handoff.ts';
import { nextWorkMany, type HeadReservation, type ReservingLookUp } from './handoff-sql/head-reservation.ts';
import { countHandoffsByState, countHandoffs, countHiddenHandoffs, listHandoffs, type HandoffFilter } from './handoff-sql/list-handoffs.ts';
import { nextWork, nextWorkAt, type WorkItem } from './handoff-sql/next-work.ts';
import { notificationsForAgent, notificationsOfHandoff, sendDueReminders } from './handoff-sql/notifications.ts';
import { recipientsWithOpenWork } from './handoff-sql/recipients-with-open-work.ts';
import { transitionAlone, transitionBatch } from './handoff-sql/transition.ts';
import type { EventWrite, TransitionWrite, TransitionWritten } from './handoff-sql/transition-write.ts';
import type { Queryable } from './prepared.ts';
import type { AttemptRecord, EventRecord, HandoffRecord, HandoffView, NotificationRecord, ProviderName } from './records.ts';

// What callers of the repository use, from the statement modules that define it.
export type { Queryable } from './prepared.ts';
export type { Enrollment, EnrollOutcome } from './handoff-sql/enroll.ts';
export type { HeadReservation } from './handoff-sql/head-reservation.ts';
export type { HandoffFilter } from './handoff-sql/list-handoffs.ts';
export type { DispatchCandidate, WorkItem } from './handoff-sql/next-work.ts';
export type {
  AttemptInsert,
  AttemptUpdate,
  EventWrite,
  HandoffCounter,
  HandoffPatch,
  TransitionStep,
  TransitionWrite,
  TransitionWritten,
} from './handoff-sql/transition-write.ts';

/**
 * SQL over the handoffs, delivery_attempts and handoff_events tables: one object for the
 * callers (libs/handoffs, the API's reads, the reconciler), each method one statement (or one
 * family) of libs/db/handoff-sql/, where its text and its guarantee are documented. Raw SQL on
 * purpose: the delivery hot path is one round trip per transition (update + event row
 * [+ attempt row] in a single statement). Only libs/handoffs calls the writing methods; nothing
 * here decides whether a move is allowed. What this object adds is state: the three batched
 * statements (`GroupCommit`: enrollments, reserving look-ups, turn ends) of its pool.
 */
export class HandoffRepository {
  private readonly enrollments: GroupCommit<{ e: Enrollment; event: EventWrite }, EnrollOutcome>;
  private readonly reservingLookUps: GroupCommit<ReservingLookUp, WorkItem | null>;
  private readonly turnEnds: GroupCommit<TransitionWrite, TransitionWritten | null>;

  constructor(private readonly pool: Queryable) {
    // A send answered 503 may or may not have been recorded (docs/ERRORS.md), so one past its
    // deadline is answered then; the worker's batched reads and ends wait for their statement.
    this.enrollments = batchedStatement(this.pool, (items) => enrollMany(this.pool, items), {
      maxBatch: GROUP_COMMIT_DEFAULTS.enrollMaxBatch,
      inFlightAtDeadline: 'answer',
    });
    this.reservingLookUps = batchedStatement(this.pool, (items) => nextWorkMany(this.pool, items), {
      maxBatch: GROUP_COMMIT_DEFAULTS.lookUpMaxBatch,
      inFlightAtDeadline: 'wait',
    });
    this.turnEnds = batchedStatement(this.pool, (items) => transitionBatch(this.pool, items), {
      maxBatch: GROUP_COMMIT_DEFAULTS.turnEndMaxBatch,
      inFlightAtDeadline: 'wait',
    });
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

  /** One handoff's enrollment (enroll.ts); those of the same moment share a statement. */
  enroll(e: Enrollment, event: EventWrite): Promise<EnrollOutcome> {
    return this.enrollments.submit({ e, event });
  }

  /** The compare-and-set transition (transition.ts); the ends of turns (`thenNextWork`) of the same moment share a statement. */
  transition(w: TransitionWrite): Promise<TransitionWritten | null> {
    if (w.thenNextWork) return this.turnEnds.submit(w);
    return transitionAlone(this.pool, w);
  }

  /**
   * The agent's next piece of work (next-work.ts). With `reserve`, the same statement also
   * reserves the head's attempt (head-reservation.ts): the reserving look-ups of many agents'
   * runs starting together (a wake job's drainer starts as many as it has slots) share one
   * statement.
   */
  nextWork(recipientId: string, now: Date, deployment: string, reserve?: HeadReservation): Promise<WorkItem | null> {
    if (!reserve) return nextWork(this.pool, recipientId, now, deployment);
    return this.reservingLookUps.submit({ recipientId, now, deployment, reserve });
  }

  nextWorkAt(recipientId: string, now: Date, deployment: string): Promise<'now' | Date | null> {
    return nextWorkAt(this.pool, recipientId, now, deployment);
  }

  recipientsWithOpenWork(
    now: Date,
    limit: number,
    deployment: string,
  ): Promise<Array<{ recipientId: string; provider: ProviderName; pool: string; live: boolean }>> {
    return recipientsWithOpenWork(this.pool, now, limit, deployment);
  }

  findById(id: string): Promise<HandoffRecord | null> {
    return findHandoff(this.pool, id);
  }

  findView(projectId: string, id: string): Promise<HandoffView | null> {
    return findHandoffView(this.pool, projectId, id);
  }

  findByIdempotencyKey(senderId: string, key: string): Promise<HandoffRecord | null> {
    return findByIdempotencyKey(this.pool, senderId, key);
  }

  findByInProgressKey(key: string): Promise<HandoffRecord | null> {
    return findByInProgressKey(this.pool, key);
  }

  list(f: HandoffFilter): Promise<HandoffView[]> {
    return listHandoffs(this.pool, f);
  }

  count(f: Omit<HandoffFilter, 'limit' | 'beforeSeq'>): Promise<number> {
    return countHandoffs(this.pool, f);
  }

  countHidden(f: Omit<HandoffFilter, 'limit' | 'beforeSeq'>): Promise<number> {
    return countHiddenHandoffs(this.pool, f);
  }

  countByState(projectId: string, viewer: Viewer): Promise<Map<DeliveryState, number>> {
    return countHandoffsByState(this.pool, projectId, viewer);
  }

  attempts(handoffId: string): Promise<AttemptRecord[]> {
    return attemptsOf(this.pool, handoffId);
  }

  latestAttempt(handoffId: string): Promise<AttemptRecord | null> {
    return latestAttemptOf(this.pool, handoffId);
  }

  attemptByRequestId(requestId: string): Promise<AttemptRecord | null> {
    return attemptByRequestIdOf(this.pool, requestId);
  }

  events(handoffId: string): Promise<EventRecord[]> {
    return eventsOf(this.pool, handoffId);
  }

  sendDueReminders(now: Date, limit: number): Promise<string[]> {
    return sendDueReminders(this.pool, now, limit);
  }

  notificationsFor(handoffId: string): Promise<NotificationRecord[]> {
    return notificationsOfHandoff(this.pool, handoffId);
  }

  notificationsForAgent(
    agentId: string,
    limit: number,
    viewer: Viewer,
  ): Promise<Array<NotificationRecord & { handoffTitle: string | null }>> {
    return notificationsForAgent(this.pool, agentId, limit, viewer);
  }
}
