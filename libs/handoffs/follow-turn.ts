/** Following an accepted turn to its end (a live one, or one a stopped worker left running), and recording how it ended. */
import { type DeliveryTarget, type ProviderAdapter, type TurnEnd } from '../adapters/provider-adapter.ts';
import type { HandoffRecord } from '../db/records.ts';
import { type Moveable } from './apply-transition.ts';
import type { DispatchDeps } from './dispatch-deps.ts';
import { didNothing, endMoves, started } from './turn-end-moves.ts';
import { busyRetryInMs, writeHistory, type WriteHistory } from './write-retries.ts';
import { anyAbort } from '../adapters/race-abort.ts';
import { endTurn, isWorkOpen, move, type Step, type WriteLock } from './turn-step.ts';

/** Follows an accepted turn to its end and records how it ended. */
export async function watch(
  deps: DispatchDeps,
  start: Moveable,
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
      await move(deps, h, [['unobservable', { reason: `nobody could observe the turn: ${(err as Error).message}`, updateAttempt: { id: attemptId, status: 'lost' } }]]);
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
