/**
 * Following an accepted turn to its end (a live one, or one a stopped worker left running), and
 * recording how it ended (`endTurn`: with the choice, and maybe the reservation, of the next).
 */
import { type DeliveryTarget, type ProviderAdapter, type TurnEnd } from '../adapters/provider-adapter.ts';
import { isSettled, type DeliveryState } from '../domain/delivery-states.ts';
import { planTransition } from '../domain/transitions.ts';
import type { WorkItem } from '../db/handoff-repository.ts';
import type { HandoffRecord } from '../db/records.ts';
import { type HandoffAtRevision, type TransitionGuard } from './apply-transition.ts';
import type { WriteLock } from './attempt-reservations.ts';
import type { DispatchDeps } from './dispatch-deps.ts';
import { didNothing, endMoves, started, type Move } from './turn-end-moves.ts';
import { busyRetryInMs, writeHistory, type WriteHistory } from './write-retries.ts';
import { anyAbort } from '../adapters/race-abort.ts';
import { isWorkOpen, move, type MoveDeps, type Step } from './turn-step.ts';

/** What following a turn and recording its end touch. */
export type FollowDeps = MoveDeps & Pick<DispatchDeps, 'deployment' | 'timing' | 'windows' | 'attemptHistory'>;

/** Follows an accepted turn to its end and records how it ended. */
export async function watch(
  deps: FollowDeps,
  start: HandoffAtRevision,
  attemptId: string,
  requestId: string,
  adapter: ProviderAdapter,
  target: DeliveryTarget,
  stop: AbortSignal,
  record: HandoffRecord,
  /** When the turn was last known to be accepted (for the unobservable rule). */
  since: Date | null,
  lock: WriteLock,
  /** The handoff's earlier writes, when the writer read them (else read if the turn ends busy). */
  history?: WriteHistory,
): Promise<Step> {
  let h = start;
  let end: TurnEnd;
  // A person may release the handoff while we wait (a hung turn): stop watching when the row
  // is no longer the one we are following.
  const released = new AbortController();
  const recheck = setInterval(() => {
    deps.handoffs.findById(h.id).then(
      (row) => {
        if (!row || row.revision !== h.revision) released.abort(new Error('the handoff was moved by someone else'));
      },
      () => undefined,
    );
  }, deps.timing.recheckMs);
  recheck.unref();
  const stopOrReleased = anyAbort([stop, released.signal]);
  const watching = stopOrReleased.signal;
  try {
    // Following a turn is waiting, not work: the run lends its place to another meanwhile.
    const follow = lock.follow ?? (<T>(wait: () => Promise<T>) => wait());
    end = await follow(() =>
      adapter.waitForTurn(
        target,
        requestId,
        {
          onRunning: async () => {
            if (h.deliveryState !== 'ACCEPTED') return;
            const running = await move(deps, h, [started(attemptId)]);
            if (running) h = running;
          },
        },
        watching,
      ),
    );
  } catch (err) {
    if (released.signal.aborted && !stop.aborted) return { kind: 'next' };
    if (stop.aborted) return { kind: 'stopped' };
    // Nobody can observe the turn right now. Past the limit, it is UNCERTAIN; else retry later.
    const from = since ?? deps.clock.now();
    if (deps.clock.now().getTime() - from.getTime() >= deps.windows.unobservableAfterMs) {
      await move(deps, h, [
        [
          'unobservable',
          { reason: `nobody could observe the turn: ${(err as Error).message}`, updateAttempt: { id: attemptId, status: 'lost' } },
        ],
      ]);
      return { kind: 'next' };
    }
    deps.logger.warn({ err, handoffId: h.id, requestId }, 'could not observe the turn; retrying later');
    return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
  } finally {
    clearInterval(recheck);
    stopOrReleased.unlink();
  }
  const busyRetryMs = end.status === 'busy' ? busyRetryInMs(deps, history ?? (await writeHistory(deps, h.id, h.attemptCount))) : 0;
  const moves = endMoves(h, end, attemptId, isWorkOpen(record), record.workState, busyRetryMs, deps.windows);
  return endTurn(deps, h, h.deliveryState === 'ACCEPTED' && !didNothing(end) ? [started(attemptId), ...moves] : moves, record, lock);
}

/**
 * Going on after `moves` were written (`moved` null: someone else moved the handoff first),
 * with the head of the queue when the statement that ended the turn read it, but only after a
 * settled end: that head leaves the moved handoff out, so a resend (which may be next) or a
 * turn that became UNCERTAIN (which its snapshot still saw live) has it looked up anew.
 */
function nextStep(moved: (HandoffAtRevision & { readonly nextWork?: WorkItem | null }) | null, moves: readonly Move[]): Step {
  const again = moved !== null && !isSettled(moved.deliveryState);
  const step: Step = moved?.nextWork !== undefined && !again ? { kind: 'next', next: moved.nextWork } : { kind: 'next' };
  if (!moved) return step;
  const delays = moves.flatMap(([, o]) => (o?.notBeforeInMs !== undefined ? [o.notBeforeInMs] : []));
  return delays.length > 0 ? { ...step, moved: moved.id, dueInMs: Math.min(...delays) } : { ...step, moved: moved.id };
}

/**
 * Ends a turn with `moves` in one statement that also reads the recipient's next work and,
 * when the run's reservations allow it (AttemptReservations.withHead), reserves it (the end of one turn, the choice of the next and
 * its reservation: one round trip). It reserves only after a settled end: the session is then
 * between turns, and only then is the head it read kept (nextStep).
 */
export async function endTurn(
  deps: MoveDeps & Pick<DispatchDeps, 'deployment'>,
  h: HandoffAtRevision,
  moves: readonly Move[],
  record: HandoffRecord,
  lock: WriteLock,
): Promise<Step> {
  if (!record.recipientId) return nextStep(await move(deps, h, moves), moves);
  const final = moves.reduce<DeliveryState>((state, [event]) => planTransition(state, event, 'system'), h.deliveryState);
  const reserve = isSettled(final) ? await lock.reservations.withHead('turn-end') : undefined;
  const guard: TransitionGuard = {
    thenNextWork: { recipientId: record.recipientId, deployment: deps.deployment, ...(reserve ? { reserve } : {}) },
  };
  const moved = await move(deps, h, moves, guard);
  lock.reservations.headAnswered(reserve, moved?.nextWork);
  return nextStep(moved, moves);
}
