import { setTimeout as sleep } from 'node:timers/promises';
import { newId } from '../domain/ids.ts';
import { holdReason } from '../domain/runtime-settings.ts';
import { planTransition } from '../domain/transitions.ts';
import { isDatabaseUnavailable } from '../db/classify-error.ts';
import type { HeadReservation, WorkItem } from '../db/handoff-repository.ts';
import type { DispatchDeps } from './dispatch-deps.ts';

/** Reads back a statement whose reply was lost at most this many times (spaced by `timing.unreachableRetryMs`). */
export const SETTLE_TRIES = 30;

const CONNECTION_RULES = ['allow', 'block'] as const;

/** Where `attempt_reserved` takes a head the statement may reserve (WAITING or BUSY): one state. */
const RESERVED_TO = (() => {
  const [fromWaiting, fromBusy] = (['WAITING', 'BUSY'] as const).map((from) => planTransition(from, 'attempt_reserved', 'system'));
  if (fromWaiting !== fromBusy) throw new Error('attempt_reserved leads WAITING and BUSY to different states');
  return fromWaiting!;
})();

/** The reason the handoffs queued behind a starting turn are given. */
export const QUEUED_BEHIND_REASON = 'another turn of the recipient is in progress';

/**
 * One dispatch run's reservations made by the statement that reads the head of the agent's
 * queue (HeadReservation in libs/db): the look-up at the start of a run, or the statement that
 * ends a turn. Then a turn costs two statements (reserve-with-the-look-up, end) instead of
 * three. It plans one only when nothing needs checking between the look-up and the
 * reservation: the run is not stopping, the agent's provider has an adapter here whose write
 * answers "busy" itself, delivery is not paused and the provider is not down; the statement
 * checks the rest (the recipient, the connection, that the head never got a busy answer).
 * Otherwise the head comes back unreserved and `deliver` runs its checks and reserves apart.
 */
export class HeadReserver {
  /** A reservation whose statement has not answered (it may have committed). */
  private outstanding: HeadReservation | null = null;

  constructor(
    private readonly deps: DispatchDeps,
    private readonly provider: string,
    private readonly fence: bigint,
    private readonly stop: AbortSignal,
  ) {}

  /**
   * A reservation for the next statement that reads the head, or undefined. Its request id is
   * registered as reserved-and-unwritten first (UnsentReservations), as every reservation's is.
   * `turn-end`: the statement records a turn's end (seen by observation), so a head that only
   * queued behind that turn may be reserved too; a plain `look-up` reserves only a WAITING head.
   */
  async plan(after: 'look-up' | 'turn-end'): Promise<HeadReservation | undefined> {
    if (this.stop.aborted) return undefined;
    const adapter = this.deps.adapters.get(this.provider);
    if (!adapter?.reportsBusyOnSend) return undefined;
    const settings = await this.deps.settingsReader.get();
    const now = this.deps.clock.now();
    // The connection rules under which a handoff may go out now, by the one rule `deliver`
    // applies (holdReason): none while delivery is paused.
    const passing = { none: holdReason(settings, null, now) === null, rules: CONNECTION_RULES.filter((rule) => holdReason(settings, rule, now) === null) };
    if (!passing.none && passing.rules.length === 0) return undefined;
    if ((await this.deps.outage.check(adapter.provider, settings.outageGuard[adapter.provider])).down) return undefined;
    const requestId = newId(now.getTime());
    this.deps.unsent.add(requestId);
    this.outstanding = {
      attemptId: newId(now.getTime()),
      requestId,
      workerId: this.deps.workerId,
      fence: this.fence,
      provider: this.provider,
      passing,
      to: RESERVED_TO,
      queued: { to: planTransition('WAITING', 'recipient_busy', 'system'), event: 'recipient_busy', reason: QUEUED_BEHIND_REASON },
      queuedBusy: after === 'turn-end',
    };
    return this.outstanding;
  }

  /**
   * The statement carrying `spec` answered with `head`. A reservation that happened is
   * announced (its event rows); one that did not gives its request id up, unless the head is
   * that very attempt, live (a read-back after a lost reply): then it is ours to send.
   */
  settled(spec: HeadReservation | undefined, head: WorkItem | null | undefined): void {
    if (!spec) return;
    this.outstanding = null;
    if (head?.reserved) {
      this.deps.events.published(head.reserved.eventIds);
      return;
    }
    if (head?.live && head.attempt?.requestId === spec.requestId) return;
    this.deps.unsent.handOver(spec.requestId);
  }

  /** The reservation whose statement has not answered (it may have committed), if any. */
  get inDoubt(): HeadReservation | null {
    return this.outstanding;
  }
}

/**
 * The head of the agent's queue, reserved when `heads` may (see HeadReserver). When the
 * statement's reply is lost with a reservation in it, the head is read again under the turn
 * lock (bounded, while Postgres is away): our attempt, if it committed, is then the live head
 * and `resumeTurn` sends it (its request id is still ours); if not, the head is as before.
 * @throws the first error when Postgres stays away (the reservation, if any, stays in doubt).
 */
export async function readHead(deps: DispatchDeps, agentId: string, heads: HeadReserver): Promise<WorkItem | null> {
  const reserve = await heads.plan('look-up');
  try {
    const head = await deps.handoffs.nextWork(agentId, deps.clock.now(), deps.deployment, reserve);
    heads.settled(reserve, head);
    return head;
  } catch (err) {
    if (!reserve) throw err;
    if (!isDatabaseUnavailable(err)) {
      heads.settled(reserve, null);
      throw err;
    }
    return readHeadAgain(deps, agentId, heads, err);
  }
}

/**
 * After a statement carrying a reservation (`heads.inDoubt`) lost its reply: reads the head
 * again, plainly, until Postgres answers (at most SETTLE_TRIES times), and settles the
 * reservation by what it finds.
 * @throws `cause` when Postgres stays away.
 */
export async function readHeadAgain(deps: DispatchDeps, agentId: string, heads: HeadReserver, cause: unknown): Promise<WorkItem | null> {
  const reserve = heads.inDoubt ?? undefined;
  for (let attempt = 1; attempt <= SETTLE_TRIES; attempt++) {
    await sleep(deps.timing.unreachableRetryMs);
    try {
      const head = await deps.handoffs.nextWork(agentId, deps.clock.now(), deps.deployment);
      heads.settled(reserve, head);
      return head;
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
    }
  }
  throw cause;
}
