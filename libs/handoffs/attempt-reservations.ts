/**
 * Reserving an attempt, and settling a reservation whose outcome is in doubt: the one module
 * that decides how a turn's write is reserved and the one routine that recovers when it is not
 * known what a reservation came to.
 *
 * Every write is reserved first: SENDING, the attempt row with its request id and the turn
 * lock's fence, committed before the adapter is called, so a reply lost after the write is
 * UNCERTAIN and never resent. Where the reservation rides is a matter of cost, not of rule:
 * - with the statement that reads the head of the agent's queue (the run's look-up, or the end
 *   of the previous turn), when nothing needs checking between the read and the reservation
 *   (`withHead`); a turn then costs two statements;
 * - apart, as a move of its own, after `deliver` made the checks (`apart`).
 * Either way the request id is registered as reserved and unwritten first (`deps.unwritten`), and
 * the reservation is outstanding until its statement answers.
 *
 * Recovery (`settle`) reads back, by the request id, what committed, bounded and spaced while
 * Postgres is away, and goes on from that; it is the same whether the reply of a reservation's
 * statement was lost or the run lost its lock before the write.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DELIVERY_WORKER_DEFAULTS } from '../config/component-defaults.ts';
import { newId } from '../domain/ids.ts';
import { holdReason } from '../domain/runtime-settings.ts';
import { planTransition } from '../domain/transitions.ts';
import { isDatabaseUnavailable } from '../db/classify-error.ts';
import type { HeadReservation, WorkItem } from '../db/handoff-repository.ts';
import type { AttemptRecord, HandoffRecord } from '../db/records.ts';
import { routeOf } from '../queue/dispatch-job.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import type { HandoffAtRevision } from './apply-transition.ts';
import type { DispatchDeps, RunSlot, TurnLockHandle } from './dispatch-deps.ts';
import type { Move } from './turn-end-moves.ts';
import { move, atRevision, type MoveDeps, type Step } from './turn-step.ts';

/** Reads back a statement whose outcome is in doubt at most this many times (spaced by `timing.unreachableRetryMs`). */
const SETTLE_TRIES = DELIVERY_WORKER_DEFAULTS.settleTries;

/** The reason the handoffs queued behind a starting turn are given. */
export const QUEUED_BEHIND_REASON = 'another turn of the recipient is in progress';

const CONNECTION_RULES = ['allow', 'block'] as const;

/** Where `attempt_reserved` takes a head the statement may reserve (WAITING or BUSY): one state. */
const RESERVED_TO = (() => {
  const [fromWaiting, fromBusy] = (['WAITING', 'BUSY'] as const).map((from) => planTransition(from, 'attempt_reserved', 'system'));
  if (fromWaiting !== fromBusy) throw new Error('attempt_reserved leads WAITING and BUSY to different states');
  return fromWaiting!;
})();

/** What reserving and settling touch. */
export type ReservationDeps = MoveDeps &
  Pick<
    DispatchDeps,
    'adapters' | 'settingsReader' | 'budgetGate' | 'outage' | 'unwritten' | 'workerId' | 'deployment' | 'scheduler' | 'timing'
  >;

/**
 * The turn lock a delivery runs under, as far as a write needs it, and the run's reservations.
 * `follow`: the run's slot lends its place while it only waits for a turn (RunSlot).
 */
export type WriteLock = Pick<TurnLockHandle, 'fence' | 'stillHeld'> & { readonly reservations: AttemptReservations } & Pick<
    RunSlot,
    'follow'
  >;

/** A reservation whose outcome is in doubt, and what the run knows of it. */
export type InDoubt =
  /** The statement carrying the outstanding reservation failed with its connection: it may have committed. */
  | { readonly kind: 'reply-lost'; readonly cause: unknown }
  /** The reservation committed at `h`, and the run will not write it (it lost the turn lock first). */
  | {
      readonly kind: 'not-written';
      readonly h: HandoffAtRevision;
      readonly attemptId: string;
      readonly requestId: string;
      readonly reason: string;
    };

/** What the read-back found of a reservation. */
type Found =
  /** Never committed. */
  | { readonly kind: 'absent' }
  /** Committed, still SENDING and unwritten: the write is still to be made (or given up). */
  | { readonly kind: 'reserved'; readonly row: HandoffRecord }
  /** A new lock holder marked it UNCERTAIN as an abandoned write: only this process can prove it never written. */
  | { readonly kind: 'taken-over'; readonly row: HandoffRecord; readonly attempt: AttemptRecord }
  /** Moved on otherwise (released, settled, a later attempt): nothing of ours to do. */
  | { readonly kind: 'moved-on' };

/**
 * One dispatch run's reservations (a run holds one agent's turn lock and reserves only that
 * agent's heads). At most one is outstanding at a time: planned, its statement not yet answered.
 */
export class AttemptReservations {
  private outstanding: { readonly requestId: string } | null = null;

  constructor(
    private readonly deps: ReservationDeps,
    private readonly run: { readonly agentId: string; readonly provider: string; readonly fence: bigint; readonly stop: AbortSignal },
  ) {}

  /**
   * A reservation for the next statement that reads the head, or undefined when one may not
   * ride on it. It may only when nothing needs checking between the read and the reservation:
   * the run is not stopping, the agent's provider has an adapter here whose write answers
   * "busy" itself, delivery is not paused and the provider is not down. The statement checks
   * the rest (the recipient, the connection rule, that the head never got a busy answer, no
   * other handoff of the recipient UNCERTAIN). `turn-end`: the statement records a turn's
   * settled end, so a head that only queued behind that turn may be reserved too; a plain
   * `look-up` reserves only a WAITING head (the turn before may have been released by a person
   * while the session is still in it).
   */
  async withHead(after: 'look-up' | 'turn-end'): Promise<HeadReservation | undefined> {
    if (this.run.stop.aborted) return undefined;
    const adapter = this.deps.adapters.get(this.run.provider);
    if (!adapter?.reportsBusyOnSend) return undefined;
    const settings = await this.deps.settingsReader.get();
    const now = this.deps.clock.now();
    // The connection rules under which a handoff may go out now, by the one rule `deliver`
    // applies (holdReason): none while delivery is paused.
    const passing = {
      none: holdReason(settings, null, now) === null,
      rules: CONNECTION_RULES.filter((rule) => holdReason(settings, rule, now) === null),
    };
    if (!passing.none && passing.rules.length === 0) return undefined;
    if ((await this.deps.outage.check(adapter.provider, settings.outageGuard[adapter.provider])).down) return undefined;
    // A budget's agent: `deliver` asks the budget once the turn before committed what it used.
    if (await this.deps.budgetGate.covers(this.run.agentId)) return undefined;
    const requestId = this.begin(now);
    return {
      attemptId: newId(now.getTime()),
      requestId,
      workerId: this.deps.workerId,
      fence: this.run.fence,
      provider: this.run.provider,
      passing,
      to: RESERVED_TO,
      queued: { to: planTransition('WAITING', 'recipient_busy', 'system'), event: 'recipient_busy', reason: QUEUED_BEHIND_REASON },
      queuedBusy: after === 'turn-end',
    };
  }

  /**
   * The statement that carried `spec` (from `withHead`) answered with `head`. A reservation
   * that happened is announced (its event rows); one that did not gives its request id up.
   */
  headAnswered(spec: HeadReservation | undefined, head: WorkItem | null | undefined): void {
    if (!spec) return;
    this.outstanding = null;
    if (head?.reserved) this.deps.events.published(head.reserved.eventIds);
    else this.deps.unwritten.delete(spec.requestId);
  }

  /**
   * The move that reserves `h` on its own, once `deliver` checked it may go out: attempt and
   * request id, the lock's fence (Postgres refuses the reservation if a newer holder reserved),
   * and what waits behind this turn made BUSY, visibly. Apply it with `move`, then `answered`.
   */
  apart(h: HandoffAtRevision, record: HandoffRecord): { move: Move; attemptId: string; requestId: string } {
    const now = this.deps.clock.now();
    const attemptId = newId(now.getTime());
    const requestId = this.begin(now);
    const reservation: Move = [
      'attempt_reserved',
      {
        reason: `attempt ${h.attemptCount + 1}`,
        detail: { requestId },
        increment: ['attemptCount'],
        insertAttempt: {
          id: attemptId,
          number: h.attemptCount + 1,
          requestId,
          workerId: this.deps.workerId,
          deliveryTarget: record.deliveryTarget,
          fence: this.run.fence,
        },
        patch: { deliveryDetail: null, notBefore: null },
        ...(record.recipientId
          ? { moveOthers: { recipientId: record.recipientId, event: 'recipient_busy' as const, reason: QUEUED_BEHIND_REASON } }
          : {}),
      },
    ];
    return { move: reservation, attemptId, requestId };
  }

  /** The move from `apart` answered: `reserved` null when it was refused (someone moved the handoff first, or the fence). */
  apartAnswered(requestId: string, reserved: HandoffAtRevision | null): void {
    this.outstanding = null;
    if (!reserved) this.deps.unwritten.delete(requestId);
  }

  /**
   * The handoff as a reservation the head look-up made leaves it (`item.reserved`): SENDING at
   * the statement's revision, one attempt more.
   */
  static reservedHead(item: WorkItem & { readonly reserved: NonNullable<WorkItem['reserved']> }): HandoffAtRevision {
    return {
      ...atRevision(item.handoff),
      deliveryState: planTransition(item.handoff.deliveryState, 'attempt_reserved', 'system'),
      revision: item.reserved.revision,
      attemptCount: item.handoff.attemptCount + 1,
    };
  }

  /**
   * The head of the agent's queue, reserved when a reservation may ride on the look-up. A lost
   * reply leaves the reservation outstanding and throws: the run then calls `settle`.
   */
  async readHead(): Promise<WorkItem | null> {
    const reserve = await this.withHead('look-up');
    try {
      const head = await this.deps.handoffs.nextWork(this.run.agentId, this.deps.clock.now(), this.deps.deployment, reserve);
      this.headAnswered(reserve, head);
      return head;
    } catch (err) {
      if (reserve && !isDatabaseUnavailable(err)) this.headAnswered(reserve, null);
      throw err;
    }
  }

  /** A reservation is outstanding: a statement carrying it has not answered (it may have committed). */
  get inDoubt(): boolean {
    return this.outstanding !== null;
  }

  /**
   * THE recovery: settles a reservation whose outcome is in doubt by what committed, read back
   * by its request id under the turn lock, retried while Postgres is away (SENDING being
   * provably unwritten is knowledge only this process has, so it is not cut short by a stop).
   * - never committed: nothing happened; the request id stays registered unwritten, so should
   *   the lost statement still commit, this process sends it when it next holds the agent;
   * - committed and still SENDING: after a lost reply it is ours to write, and the step carries
   *   the head (that attempt, live) for `resumeTurn`; a run that will not write it records
   *   `lock_lost` (SENDING -> WAITING, attempt `not_sent`);
   * - a new lock holder marked it UNCERTAIN ("its writer stopped mid-send"): `unsent_proven`
   *   (UNCERTAIN -> WAITING) and a wake-up, instead of leaving it to the history scans, which
   *   would end it CANCELLED; it goes out again under a new request id;
   * - anything else moved it: that stands.
   * Postgres away past SETTLE_TRIES: a pause (the next holder finds the attempt and treats it as
   * UNCERTAIN), or `stopped` for a run that lost its lock.
   * @throws the error of a read-back that failed otherwise than by Postgres being away.
   */
  async settle(doubt: InDoubt): Promise<Step> {
    const requestId = doubt.kind === 'not-written' ? doubt.requestId : this.outstanding?.requestId;
    if (requestId === undefined) throw doubt.kind === 'reply-lost' ? doubt.cause : new Error('no reservation in doubt');
    this.outstanding = null;
    const deps = this.deps;
    // A write this run gives up is no longer one this process may send later.
    if (doubt.kind === 'not-written') deps.unwritten.delete(requestId);
    const done: Step = doubt.kind === 'not-written' ? { kind: 'stopped' } : { kind: 'next' };
    // The run that lost its lock records that first, from what it knows (one statement).
    let unwritten: HandoffAtRevision | null = doubt.kind === 'not-written' ? doubt.h : null;
    const reason =
      doubt.kind === 'not-written' ? doubt.reason : 'the reservation committed but its reply was lost, and the write was never started';
    for (let attempt = 1; ; attempt++) {
      try {
        if (unwritten) {
          const attemptId = doubt.kind === 'not-written' ? doubt.attemptId : '';
          const moved = await move(deps, unwritten, [
            [
              'lock_lost',
              {
                reason,
                patch: { deliveryDetail: null },
                updateAttempt: { id: attemptId, status: 'not_sent', error: reason, finished: true },
              },
            ],
          ]);
          if (moved) return done;
          unwritten = null;
        }
        const found = await this.readBack(requestId);
        switch (found.kind) {
          case 'absent':
            deps.logger.info({ requestId, agentId: this.run.agentId }, 'the attempt reservation did not commit');
            return done;
          case 'reserved':
            if (doubt.kind === 'not-written') {
              // Our lock_lost did not commit (its own reply was lost before it ran): again.
              unwritten = atRevision(found.row);
              continue;
            }
            deps.logger.info(
              { handoffId: found.row.id, requestId },
              'the attempt reservation committed although its reply was lost; sending it',
            );
            return { kind: 'next', next: await deps.handoffs.nextWork(this.run.agentId, deps.clock.now(), deps.deployment) };
          case 'taken-over': {
            deps.unwritten.delete(requestId);
            const proven = await move(deps, atRevision(found.row), [
              [
                'unsent_proven',
                {
                  reason: `the worker that reserved attempt ${found.attempt.number} proves it never wrote it: ${reason}`,
                  patch: { deliveryDetail: null },
                  updateAttempt: { id: found.attempt.id, status: 'not_sent', error: reason, finished: true },
                },
              ],
            ]);
            // Moved by someone else since the read (a history scan's scan_missed keeps it
            // UNCERTAIN at a later revision): read it again; only this process can make the proof.
            if (!proven) continue;
            await this.wakeAfterProof(found.row, proven.revision);
            return done;
          }
          case 'moved-on':
            deps.unwritten.delete(requestId);
            return done;
          default:
            return found satisfies never;
        }
      } catch (err) {
        if (!isDatabaseUnavailable(err)) throw err;
        if (attempt >= SETTLE_TRIES) {
          deps.logger.warn(
            { err, requestId, agentId: this.run.agentId },
            'could not read back an attempt reservation; leaving it to the next lock holder',
          );
          return doubt.kind === 'not-written' ? { kind: 'stopped' } : { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
        }
        await sleep(deps.timing.unreachableRetryMs);
      }
    }
  }

  /** Registers a new request id as reserved and unwritten, outstanding until its statement answers. */
  private begin(now: Date): string {
    const requestId = newId(now.getTime());
    this.deps.unwritten.add(requestId);
    this.outstanding = { requestId };
    return requestId;
  }

  /** What committed of the reservation carrying `requestId`: two reads by unique keys. */
  private async readBack(requestId: string): Promise<Found> {
    const attempt = await this.deps.handoffs.attemptByRequestId(requestId);
    if (!attempt) return { kind: 'absent' };
    const row = await this.deps.handoffs.findById(attempt.handoffId);
    if (!row) return { kind: 'moved-on' };
    const latest = attempt.number === row.attemptCount;
    if (latest && row.deliveryState === 'SENDING' && attempt.status === 'sending') return { kind: 'reserved', row };
    if (latest && row.deliveryState === 'UNCERTAIN') return { kind: 'taken-over', row, attempt };
    return { kind: 'moved-on' };
  }

  /** A handoff proven never written goes out again now: queue its recipient (the sweep would, later). */
  private async wakeAfterProof(row: HandoffRecord, revision: number): Promise<void> {
    if (!row.recipientId || !row.provider) return;
    const job = {
      ...routeOf({ recipientId: row.recipientId, provider: row.provider, pool: row.pool }),
      cause: 'due' as const,
      handoffId: row.id,
    };
    await this.deps.scheduler.enqueue(job, JOB_IDS.unsentProven(row.id, revision)).catch((err: unknown) => {
      this.deps.logger.warn({ err, handoffId: row.id }, 'could not queue the proven-unsent handoff; the sweep will');
    });
  }
}
