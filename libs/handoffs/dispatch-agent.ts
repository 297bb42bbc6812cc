import type { ProviderAdapter } from '../adapters/provider-adapter.ts';
import type { OutageGuardSpec, RuntimeSettings } from '../domain/runtime-settings.ts';
import type { DispatchJob } from '../queue/dispatch-job.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { deliver, resumeTurn, type Step } from './deliver-turn.ts';
import type { CoreDeps } from './ports.ts';

/** A held per-agent turn lock; `signal` aborts when ownership is lost. */
export interface TurnLockHandle {
  readonly token: string;
  readonly signal: AbortSignal;
  release(): Promise<boolean>;
}

export type LockAttempt =
  | { readonly acquired: true; readonly lock: TurnLockHandle }
  | { readonly acquired: false; readonly holder: string | null; readonly retryInMs: number };

export interface DispatchDeps extends CoreDeps {
  readonly locks: { acquire(agentId: string): Promise<LockAttempt>; backOff(agentId: string, ms: number): Promise<void> };
  readonly adapters: { get(provider: string): ProviderAdapter | undefined };
  readonly settingsReader: { get(): Promise<RuntimeSettings> };
  readonly outage: { check(provider: string, spec: OutageGuardSpec | undefined): Promise<{ down: boolean; detail: string | null }> };
  readonly workerId: string;
  readonly timing: {
    /** Back-off before asking a busy session again. */
    readonly busyRetryMs: number;
    /** Back-off after the provider could not be reached. */
    readonly unreachableRetryMs: number;
    /** Back-off while the provider's outage guard says it is down. */
    readonly outageRetryMs: number;
    /** How often a watcher re-reads its handoff, to notice a release by a person. */
    readonly recheckMs: number;
  };
}

export interface DispatchSignals {
  /** Stop starting new turns (shutdown has begun). */
  readonly draining: AbortSignal;
  /** Stop watching live turns and hand them back (the shutdown grace ran out). */
  readonly handBack: AbortSignal;
}

export type DispatchOutcome = 'idle' | 'locked' | 'paused' | 'stopped';

export interface DispatchSummary {
  outcome: DispatchOutcome;
  /** Turns finished or moved on by this call. */
  moved: number;
}

/**
 * Delivers an agent's queue, one turn at a time, in send order. Takes the agent's turn lock
 * (or, if another worker holds it, marks the triggering handoff BUSY and schedules a retry
 * for when that lock expires), then, while it holds the lock: first finishes any turn that an
 * earlier holder left live, then delivers the oldest dispatchable handoff, and repeats. The
 * lock is held for whole turns. After releasing it, looks once more so no wake-up is lost.
 */
export async function dispatchAgent(deps: DispatchDeps, job: DispatchJob, signals: DispatchSignals): Promise<DispatchSummary> {
  const attempt = await deps.locks.acquire(job.agentId);
  if (!attempt.acquired) {
    // Another worker holds the agent's turn. Nothing to do: the holder looks at Postgres again
    // after releasing the lock, and if it dies, the reconciler's sweep re-queues the agent once
    // its lock expires. (Handoffs that wait meanwhile are BUSY: see send-handoff.ts and the
    // attempt reservation in deliver-turn.ts.)
    return { outcome: 'locked', moved: 0 };
  }
  const { lock } = attempt;
  const stopStarting = AbortSignal.any([signals.draining, lock.signal]);
  const stopWatching = AbortSignal.any([signals.handBack, lock.signal]);
  let moved = 0;
  let outcome: DispatchOutcome = 'idle';
  let retryInMs = 0;
  try {
    while (!stopStarting.aborted) {
      const item = await deps.handoffs.nextWork(job.agentId, deps.clock.now());
      if (!item) break;
      const step: Step = item.live ? await resumeTurn(deps, item, stopWatching) : await deliver(deps, item, stopWatching);
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
    }
    if (stopStarting.aborted && outcome === 'idle') outcome = 'stopped';
  } finally {
    await lock.release();
    await scheduleFollowUp(deps, job, lock.token, outcome, retryInMs);
  }
  return { outcome, moved };
}

/** After the lock is released: queue whatever is (or becomes) due, so nothing waits forever. */
async function scheduleFollowUp(deps: DispatchDeps, job: DispatchJob, token: string, outcome: DispatchOutcome, retryInMs: number): Promise<void> {
  const base = { agentId: job.agentId, provider: job.provider };
  try {
    // Due-job ids carry this run's lock token: a run woken by a due job must not have its own
    // follow-up swallowed as a duplicate of the job it is still running.
    if (outcome === 'paused') {
      await deps.locks.backOff(job.agentId, retryInMs);
      const at = deps.clock.now().getTime() + retryInMs;
      await deps.scheduler.enqueue({ ...base, cause: 'due' }, JOB_IDS.dueAt(job.agentId, at, token), retryInMs);
      return;
    }
    const next = await deps.handoffs.nextWorkAt(job.agentId, deps.clock.now());
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
