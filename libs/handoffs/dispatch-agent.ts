import type { DispatchJob } from '../queue/dispatch-job.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { deliver, resumeTurn } from './deliver-turn.ts';
import { bindRoleWork } from './route-by-role.ts';
import type { Step } from './turn-step.ts';
import { AttemptReservations, type WriteLock } from './attempt-reservations.ts';
import { isDatabaseUnavailable } from '../db/classify-error.ts';
import type { WorkItem } from '../db/handoff-repository.ts';
import { anyAbort } from '../adapters/race-abort.ts';
import type { LockRelease } from '../locks/turn-locks.ts';
import type { DispatchDeps, DispatchSignals, RunSlot } from './dispatch-deps.ts';

export type DispatchOutcome = 'idle' | 'locked' | 'paused' | 'stopped';

export interface DispatchSummary {
  outcome: DispatchOutcome;
  /** Turns finished or moved on by this call. */
  moved: number;
}

/**
 * Delivers an agent's queue, one turn at a time, in send order. Tries the agent's turn lock
 * once; if another worker holds it, returns `locked` at once, moving nothing and scheduling
 * nothing (the failed acquisition left the holder a pending wake-up, so it looks at Postgres again
 * after releasing; a dead holder's agent is re-queued by the reconciler's sweep once its lock
 * expires). While it holds the lock: first
 * finishes any turn that an earlier holder left live, then delivers the oldest dispatchable
 * handoff, and repeats. The lock is held for whole turns. After releasing it, queues a
 * follow-up for whatever is (or becomes) due, so no wake-up is lost (scheduleFollowUp).
 * A job for an agent of another deployment finds no work (`nextWork` and `nextWorkAt` read only
 * agents of `deps.deployment`): it ends `idle`, writing nothing and queuing nothing, because
 * the lock it took is not the one that agent's deployment holds during its turns.
 */
export async function dispatchAgent(
  deps: DispatchDeps,
  job: DispatchJob,
  signals: DispatchSignals,
  run: RunSlot = {},
): Promise<DispatchSummary> {
  const attempt = await deps.locks.acquire(job.agentId);
  if (!attempt.acquired) {
    // Another worker holds the agent's turn. Nothing to do: the acquisition left it a pending
    // wake-up, so the holder looks at Postgres again after releasing the lock, and if it dies, the
    // reconciler's sweep re-queues the agent once its lock expires. Handoffs that wait behind
    // the live turn were already made BUSY, not here: at send (send-handoff.ts, when the
    // recipient has a turn in flight) or when the holder reserved its attempt (`moveOthers`).
    return { outcome: 'locked', moved: 0 };
  }
  const { lock } = attempt;
  // Followed only while this run goes (the worker's signals are shared by all its runs).
  const starting = anyAbort([signals.draining, lock.signal]);
  const watching = anyAbort([signals.stopFollowing, lock.signal]);
  const stopStarting = starting.signal;
  const stopWatching = watching.signal;
  let moved = 0;
  let outcome: DispatchOutcome = 'idle';
  let retryInMs = 0;
  // When each handoff this run made wait (a resend delay, a back-off) goes out again: the
  // latest move of a handoff decides (a resend that failed again in the same run waits longer).
  const dues = new Map<string, number>();
  // How this run reserves its attempts, and settles one whose outcome is in doubt.
  const reservations = new AttemptReservations(deps, {
    agentId: job.agentId,
    provider: job.provider,
    fence: lock.fence,
    stop: stopStarting,
  });
  const runLock: WriteLock = {
    fence: lock.fence,
    stillHeld: () => lock.stillHeld(),
    reservations,
    ...(run.follow ? { follow: run.follow } : {}),
  };
  try {
    // The head of the queue as the statement that ended the last turn found it, when it did.
    let carried: WorkItem | null | undefined;
    // An attempt this process reserved and never wrote is always taken on, even when the run is
    // stopping: it is written only while the lock is proven, and otherwise recorded as never
    // written (lock_lost), so none is left SENDING for the next holder to find UNCERTAIN.
    const ours = (c: WorkItem | null | undefined) =>
      c?.reserved !== undefined || (c?.live === true && c.attempt !== null && deps.unwritten.has(c.attempt.requestId));
    while (!stopStarting.aborted || ours(carried)) {
      let step: Step;
      try {
        const item = carried !== undefined ? carried : await reservations.readHead();
        carried = undefined;
        // An empty queue: an idle member of a role binds one waiting role handoff, then reads its head again.
        if (!item && !stopStarting.aborted && (await bindRoleWork(deps, job.agentId))) continue;
        if (!item) break;
        step = item.live ? await resumeTurn(deps, item, stopWatching, runLock) : await deliver(deps, item, stopWatching, runLock);
      } catch (err) {
        // A statement carrying a reservation (the look-up, the reservation apart, or the end of
        // the previous turn) failed with its connection: it may have committed. Read back under
        // the lock what it did; our attempt, if it committed, comes back as the head to send.
        if (!reservations.inDoubt || !isDatabaseUnavailable(err)) throw err;
        step = await reservations.settle({ kind: 'reply-lost', cause: err });
        if (step.kind === 'next') {
          carried = step.next;
          continue;
        }
      }
      if (step.kind === 'stopped') {
        outcome = 'stopped';
        break;
      }
      if (step.kind === 'pause') {
        outcome = 'paused';
        retryInMs = step.retryInMs;
        break;
      }
      moved++;
      carried = step.next;
      if (step.moved !== undefined) {
        if (step.dueInMs !== undefined) dues.set(step.moved, deps.clock.now().getTime() + step.dueInMs);
        else dues.delete(step.moved);
      }
    }
    if (stopStarting.aborted && outcome === 'idle') outcome = 'stopped';
  } finally {
    starting.unlink();
    watching.unlink();
    const released = await lock.release();
    const dueAt = dues.size > 0 ? Math.min(...dues.values()) : null;
    await scheduleFollowUp(deps, job, lock.token, { outcome, retryInMs, released, dueAt, moved });
  }
  return { outcome, moved };
}

/**
 * After the lock is released: queue whatever is (or becomes) due, so nothing waits forever.
 * A run that ended idle and released its lock cleanly knows its queue without asking Postgres:
 * its last look found nothing to start now, it made due (`dueAt`) what it made wait, and
 * whoever committed work for the agent after that look found the lock held and left a
 * pending wake-up (`released` is then `recheck`), or found it free and queued a job of its own.
 * Every other end (a pending wake-up, a lost lock, a stop) asks Postgres when the next work is due, and so
 * does a run woken by a due time that found nothing to start: BullMQ may run a delayed job up
 * to a millisecond early, when the handoff it was for is not due yet, and trusting the look
 * would leave that handoff waiting for the sweep.
 */
async function scheduleFollowUp(
  deps: Pick<DispatchDeps, 'locks' | 'scheduler' | 'handoffs' | 'clock' | 'deployment' | 'logger'>,
  job: DispatchJob,
  token: string,
  end: { outcome: DispatchOutcome; retryInMs: number; released: LockRelease; dueAt: number | null; moved: number },
): Promise<void> {
  const base = { agentId: job.agentId, provider: job.provider, ...(job.pool !== undefined ? { pool: job.pool } : {}) };
  try {
    // Due-job ids carry this run's lock token: a run woken by a due job must not have its own
    // follow-up swallowed as a duplicate of the job it is still running.
    if (end.outcome === 'paused') {
      await deps.locks.backOff(job.agentId, end.retryInMs);
      const at = deps.clock.now().getTime() + end.retryInMs;
      await deps.scheduler.enqueue({ ...base, cause: 'due' }, JOB_IDS.dueAt(job.agentId, at, token), end.retryInMs);
      return;
    }
    const earlyDueJob = job.cause === 'due' && end.moved === 0;
    if (end.outcome === 'idle' && end.released === 'released' && !earlyDueJob) {
      if (end.dueAt === null) return;
      const delay = Math.max(0, end.dueAt - deps.clock.now().getTime());
      await deps.scheduler.enqueue({ ...base, cause: 'due' }, JOB_IDS.dueAt(job.agentId, end.dueAt, token), delay);
      return;
    }
    const next = await deps.handoffs.nextWorkAt(job.agentId, deps.clock.now(), deps.deployment);
    if (next === null) return;
    if (next === 'now') {
      await deps.scheduler.enqueue({ ...base, cause: 'after_turn' }, JOB_IDS.afterTurn(job.agentId, token));
    } else {
      const delay = Math.max(0, next.getTime() - deps.clock.now().getTime());
      await deps.scheduler.enqueue({ ...base, cause: 'due' }, JOB_IDS.dueAt(job.agentId, next.getTime(), token), delay);
    }
  } catch (err) {
    // The reconciler's sweep finds the work from Postgres; log and move on.
    deps.logger.warn({ err, agentId: job.agentId }, 'could not schedule the follow-up dispatch');
  }
}
