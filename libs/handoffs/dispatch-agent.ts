import { DELIVERY_POLICY, eventAfterInterruption, eventAfterNotSent, eventAfterTurnError, refusalBudgetSpent } from '../domain/delivery-policy.ts';
import { assertNever, hasErrorCode } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import type { DeliveryTarget, ProviderAdapter, TurnEnd, TurnRequest } from '../adapters/provider-adapter.ts';
import type { AttemptRecord, HandoffRecord } from '../db/records.ts';
import type { DispatchJob } from '../queue/dispatch-job.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { applyTransition, type Moveable, type TransitionOptions } from './apply-transition.ts';
import { SYSTEM_ACTOR, type Actor, type CoreDeps } from './ports.ts';
import type { DeliveryEvent } from '../domain/transitions.ts';
import { holdReason, type OutageGuardSpec, type RuntimeSettings } from '../domain/runtime-settings.ts';
import type { DispatchCandidate } from '../db/handoff-repository.ts';

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

const NEVER = new AbortController().signal;

function moveable(h: HandoffRecord): Moveable {
  return {
    id: h.id,
    deliveryState: h.deliveryState,
    revision: h.revision,
    attemptCount: h.attemptCount,
    refusals: h.refusals,
    errorResends: h.errorResends,
    interruptResends: h.interruptResends,
  };
}

/** Result of handling one handoff: go on with the queue, or pause it until `retryInMs`. */
type Step = { kind: 'next' } | { kind: 'pause'; retryInMs: number } | { kind: 'stopped' };

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
    if (job.handoffId) await markBusy(deps, job.handoffId);
    await deps.scheduler.enqueue(
      { agentId: job.agentId, provider: job.provider, cause: 'lock_retry' },
      JOB_IDS.lockRetry(job.agentId, attempt.holder ?? 'none'),
      attempt.retryInMs + 25,
    );
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
      const live = await deps.handoffs.inFlightFor(job.agentId);
      let step: Step;
      if (live) {
        step = await resumeTurn(deps, live, stopWatching);
      } else {
        const head = await deps.handoffs.nextDispatchable(job.agentId, deps.clock.now());
        if (!head) break;
        step = await deliver(deps, head, stopWatching);
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

/** The lock is held elsewhere: a WAITING handoff is now visibly BUSY. */
async function markBusy(deps: DispatchDeps, handoffId: string): Promise<void> {
  const h = await deps.handoffs.findById(handoffId);
  if (!h || h.deliveryState !== 'WAITING') return;
  await move(deps, moveable(h), 'recipient_busy', { reason: 'another turn of the recipient is in progress' });
}

/** applyTransition as the worker; a stale revision means someone else moved it: not an error here. */
async function move(deps: DispatchDeps, h: Moveable, event: DeliveryEvent, opts: TransitionOptions = {}): Promise<Moveable | null> {
  const actor: Actor = { ...SYSTEM_ACTOR, id: deps.workerId };
  try {
    return await applyTransition(deps, h, event, actor, opts);
  } catch (err) {
    if (hasErrorCode(err, 'stale_revision') || hasErrorCode(err, 'handoff_not_found')) {
      deps.logger.info({ handoffId: h.id, event }, 'handoff moved by someone else; skipping');
      return null;
    }
    throw err;
  }
}

/** Plain messages are always "open" for delivery; work stops being open once closed, cancelled or expired. */
function isWorkOpen(h: HandoffRecord): boolean {
  return h.workState === null || h.workState === 'open' || h.workState === 'claimed';
}

function targetOf(h: HandoffRecord, settings: Readonly<Record<string, unknown>>, handle: string): DeliveryTarget {
  return { agentId: h.recipientId ?? '', handle, target: h.deliveryTarget, settings };
}

async function recipientFor(deps: DispatchDeps, h: HandoffRecord) {
  const agent = h.recipientId ? await deps.agents.findById(h.recipientId) : null;
  const current = agent !== null && agent.removedAt === null && agent.generation === h.recipientGeneration;
  return { agent, current };
}

/** One new turn for the head of the queue. */
async function deliver(deps: DispatchDeps, record: DispatchCandidate, stop: AbortSignal): Promise<Step> {
  let h = moveable(record);
  const { agent, current } = await recipientFor(deps, record);
  if (!agent || !current) {
    await move(deps, h, 'recipient_gone', {
      reason: 'the recipient (or the session it had when the handoff was sent) no longer exists',
      patch: { deliveryDetail: 'recipient gone; not redirected' },
    });
    return { kind: 'next' };
  }
  const adapter = deps.adapters.get(record.provider ?? '');
  if (!adapter) {
    deps.logger.error({ handoffId: record.id, provider: record.provider }, 'no adapter for this provider in this worker');
    return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
  }
  const target = targetOf(record, agent.providerSettings, agent.handle);

  // Deliberate blocks: HELD, no attempt spent. The reconciler lifts the hold when it ends.
  const settings = await deps.settingsReader.get();
  const hold = holdReason(settings, record.connectionRule, deps.clock.now());
  if (hold) {
    await move(deps, h, 'held', { reason: hold, patch: { deliveryDetail: hold } });
    return { kind: 'next' };
  }
  // Provider outage: stay WAITING with the explanation, no attempt spent, look again later.
  const status = await deps.outage.check(adapter.provider, settings.outageGuard[adapter.provider]);
  if (status.down) {
    const detail = `provider outage: ${status.detail ?? adapter.provider}`;
    if (record.deliveryDetail !== detail || h.deliveryState !== 'WAITING') {
      await move(deps, h, 'provider_outage', { reason: detail, patch: { deliveryDetail: detail } });
    }
    return { kind: 'pause', retryInMs: deps.timing.outageRetryMs };
  }

  let busy: boolean;
  try {
    busy = await adapter.isBusy(target, NEVER);
  } catch (err) {
    deps.logger.warn({ err, handoffId: record.id }, 'provider unreachable while checking busy; retrying later');
    return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
  }
  if (busy) {
    if (h.deliveryState === 'WAITING') {
      await move(deps, h, 'recipient_busy', { reason: 'the session reports it is in a turn', notBeforeInMs: deps.timing.busyRetryMs });
    }
    return { kind: 'pause', retryInMs: deps.timing.busyRetryMs };
  }

  const attemptId = newId(deps.clock.now().getTime());
  const requestId = newId(deps.clock.now().getTime());
  const reserved = await move(deps, h, 'attempt_reserved', {
    reason: `attempt ${h.attemptCount + 1}`,
    detail: { requestId },
    increment: ['attemptCount'],
    insertAttempt: { id: attemptId, number: h.attemptCount + 1, requestId, workerId: deps.workerId, deliveryTarget: record.deliveryTarget },
    patch: { deliveryDetail: null, notBefore: null },
  });
  if (!reserved) return { kind: 'next' };
  h = reserved;

  const sender = await deps.agents.findById(record.senderId);
  const turn: TurnRequest = {
    requestId,
    handoffId: record.id,
    attempt: h.attemptCount,
    from: sender?.handle ?? 'unknown',
    title: record.title,
    message: record.message,
    focus: record.focus,
    doneWhen: record.doneWhen,
    context: { summary: record.contextSummary, openQuestions: record.openQuestions, nextSteps: record.nextSteps },
  };
  // The write itself is never aborted: once started, its outcome must be recorded.
  const sent = await adapter.sendTurn(target, turn, NEVER);
  const onAttempt = (status: AttemptRecord['status'], extra: Partial<TransitionOptions['updateAttempt']> = {}) => ({
    id: attemptId,
    status,
    ...extra,
  });
  switch (sent.outcome) {
    case 'accepted': {
      const accepted = await move(deps, h, 'turn_accepted', { updateAttempt: onAttempt('accepted', { accepted: true, observed: true }) });
      if (!accepted) return { kind: 'next' };
      return watch(deps, accepted, attemptId, requestId, adapter, target, stop, isWorkOpen(record));
    }
    case 'busy': {
      await move(deps, h, 'session_busy', {
        reason: sent.detail ?? 'the session is in a turn',
        notBeforeInMs: deps.timing.busyRetryMs,
        updateAttempt: onAttempt('busy', { finished: true }),
      });
      return { kind: 'pause', retryInMs: deps.timing.busyRetryMs };
    }
    case 'rejected': {
      const rejected = await move(deps, h, 'owner_rejected', {
        reason: sent.reason,
        increment: ['refusals'],
        patch: { deliveryDetail: sent.reason },
        updateAttempt: onAttempt('rejected', { error: sent.reason, finished: true }),
      });
      if (rejected && refusalBudgetSpent(rejected)) {
        await move(deps, rejected, 'rejected_twice', { reason: `refused ${rejected.refusals} times`, patch: { deliveryDetail: sent.reason } });
      }
      return { kind: 'next' };
    }
    case 'not_sent': {
      const event = eventAfterNotSent(h);
      await move(deps, h, event, {
        reason: sent.error,
        increment: ['errorResends'],
        patch: { deliveryDetail: sent.error },
        ...(event === 'send_failed' ? { notBeforeInMs: deps.timing.unreachableRetryMs } : {}),
        updateAttempt: onAttempt('not_sent', { error: sent.error, finished: true }),
      });
      return event === 'send_failed' ? { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs } : { kind: 'next' };
    }
    case 'gone':
      await move(deps, h, 'recipient_gone', {
        reason: sent.reason,
        patch: { deliveryDetail: sent.reason },
        updateAttempt: onAttempt('cancelled', { error: sent.reason, finished: true }),
      });
      return { kind: 'next' };
    case 'lost':
      await move(deps, h, 'reply_lost', {
        reason: sent.error,
        patch: { deliveryDetail: 'the write may have landed; reconciling by observation, never resent blindly' },
        updateAttempt: onAttempt('lost', { error: sent.error }),
      });
      return { kind: 'next' };
    default:
      return assertNever(sent, 'send outcome');
  }
}

/** A turn an earlier lock holder left live (it died, lost its lock, or handed it back). */
async function resumeTurn(deps: DispatchDeps, record: HandoffRecord, stop: AbortSignal): Promise<Step> {
  const h = moveable(record);
  const attempt = await deps.handoffs.latestAttempt(record.id);
  if (record.deliveryState === 'SENDING' || !attempt) {
    // Whoever reserved this write is gone mid-send: it may have landed. Never resend blindly.
    await move(deps, h, 'reply_lost', {
      reason: 'the worker that was writing this turn stopped before recording the outcome',
      patch: { deliveryDetail: 'the write may have landed; reconciling by observation, never resent blindly' },
      ...(attempt ? { updateAttempt: { id: attempt.id, status: 'lost' as const, error: 'writer stopped' } } : {}),
    });
    return { kind: 'next' };
  }
  const { agent } = await recipientFor(deps, record);
  const adapter = deps.adapters.get(record.provider ?? '');
  if (!adapter) return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
  const target = targetOf(record, agent?.providerSettings ?? {}, agent?.handle ?? '');
  return watch(deps, h, attempt.id, attempt.requestId, adapter, target, stop, isWorkOpen(record), attempt);
}

/** Follows an accepted turn to its end and records how it ended. */
async function watch(
  deps: DispatchDeps,
  start: Moveable,
  attemptId: string,
  requestId: string,
  adapter: ProviderAdapter,
  target: DeliveryTarget,
  stop: AbortSignal,
  workOpen: boolean,
  attempt?: AttemptRecord,
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
  const watching = AbortSignal.any([stop, released.signal]);
  try {
    end = await adapter.waitForTurn(
      target,
      requestId,
      {
        onRunning: async () => {
          if (h.deliveryState !== 'ACCEPTED') return;
          const running = await move(deps, h, 'turn_started', { updateAttempt: { id: attemptId, status: 'running', observed: true } });
          if (running) h = running;
        },
      },
      watching,
    );
  } catch (err) {
    if (released.signal.aborted && !stop.aborted) return { kind: 'next' };
    if (stop.aborted) return { kind: 'stopped' };
    // Nobody can observe the turn right now. Past the limit, it is UNCERTAIN; else retry later.
    const since = attempt?.acceptedAt ?? attempt?.startedAt ?? deps.clock.now();
    if (deps.clock.now().getTime() - since.getTime() >= DELIVERY_POLICY.unobservableAfterMs) {
      await move(deps, h, 'unobservable', { reason: `nobody could observe the turn: ${(err as Error).message}`, updateAttempt: { id: attemptId, status: 'lost' } });
      return { kind: 'next' };
    }
    deps.logger.warn({ err, handoffId: h.id, requestId }, 'could not observe the turn; retrying later');
    return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
  } finally {
    clearInterval(recheck);
  }
  const finished = { finished: true, observed: true } as const;
  switch (end.status) {
    case 'returned':
      await move(deps, h, 'turn_returned', {
        reason: end.result.summary.slice(0, 200),
        patch: { resultSummary: end.result.summary, result: end.result.output ?? null, deliveryDetail: null },
        updateAttempt: { id: attemptId, status: 'returned', ...finished },
      });
      return { kind: 'next' };
    case 'failed': {
      const event = eventAfterTurnError(h);
      await move(deps, h, event, {
        reason: end.error,
        patch: { deliveryDetail: end.error },
        ...(event === 'turn_failed_resend' ? { increment: ['errorResends'] as const } : {}),
        updateAttempt: { id: attemptId, status: 'failed', error: end.error, ...finished },
      });
      return { kind: 'next' };
    }
    case 'interrupted': {
      const event = eventAfterInterruption(h, workOpen);
      const resend = event === 'turn_interrupted_resend';
      await move(deps, h, event, {
        reason: end.error,
        patch: { deliveryDetail: end.error },
        ...(resend ? { notBeforeInMs: DELIVERY_POLICY.interruptResendDelayMs } : {}),
        ...(resend ? { increment: ['interruptResends'] as const } : {}),
        updateAttempt: { id: attemptId, status: 'interrupted', error: end.error, ...finished },
      });
      return { kind: 'next' };
    }
    case 'unobservable':
      await move(deps, h, 'unobservable', { reason: end.error, updateAttempt: { id: attemptId, status: 'lost', error: end.error } });
      return { kind: 'next' };
    default:
      return assertNever(end, 'turn end');
  }
}
