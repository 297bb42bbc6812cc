import { DELIVERY_POLICY, eventAfterInterruption, eventAfterNotSent, eventAfterTurnError, refusalBudgetSpent } from '../domain/delivery-policy.ts';
import { assertNever, hasErrorCode } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import { holdReason } from '../domain/runtime-settings.ts';
import type { DeliveryEvent } from '../domain/transitions.ts';
import type { DeliveryTarget, ProviderAdapter, TurnEnd, TurnObservation, TurnRequest } from '../adapters/provider-adapter.ts';
import type { AttemptUpdate, WorkItem } from '../db/handoff-repository.ts';
import type { HandoffRecord } from '../db/records.ts';
import { applyTransitions, type Moveable, type TransitionOptions } from './apply-transition.ts';
import type { DispatchDeps } from './dispatch-agent.ts';
import { SYSTEM_ACTOR } from './ports.ts';
import { contextPacketFor } from './manage-sessions.ts';

/** Result of handling one piece of work: go on with the queue, pause it, or stop. */
export type Step = { kind: 'next' } | { kind: 'pause'; retryInMs: number } | { kind: 'stopped' };

type Move = readonly [DeliveryEvent, TransitionOptions?];

const NEVER = new AbortController().signal;

export function moveable(h: HandoffRecord): Moveable {
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

/**
 * Applies moves as the worker (one statement for all of them). A stale revision means someone
 * else moved the handoff first (a release by a person, a reconciler): not an error here, the
 * caller simply moves on.
 */
export async function move(deps: DispatchDeps, h: Moveable, moves: readonly Move[], guard: { anyRevision?: boolean } = {}): Promise<Moveable | null> {
  try {
    return await applyTransitions(deps, h, moves, { ...SYSTEM_ACTOR, id: deps.workerId }, guard);
  } catch (err) {
    if (hasErrorCode(err, 'stale_revision') || hasErrorCode(err, 'handoff_not_found')) {
      deps.logger.debug({ handoffId: h.id, event: moves[0]?.[0] }, 'handoff moved by someone else; skipping');
      return null;
    }
    throw err;
  }
}

/** Plain messages are always "open" for delivery; work stops being open once closed, cancelled or expired. */
function isWorkOpen(h: HandoffRecord): boolean {
  return h.workState === null || h.workState === 'open' || h.workState === 'claimed';
}

function targetOf(item: WorkItem): DeliveryTarget {
  return {
    agentId: item.handoff.recipientId ?? '',
    handle: item.recipient?.handle ?? '',
    target: item.handoff.deliveryTarget,
    settings: item.recipient?.settings ?? {},
  };
}

function endOf(seen: TurnObservation): TurnEnd | null {
  if (!seen.found) return null;
  switch (seen.status) {
    case 'returned':
      return { status: 'returned', result: seen.result ?? { summary: '' } };
    case 'failed':
      return { status: 'failed', error: seen.error ?? 'failed' };
    case 'interrupted':
      return { status: 'interrupted', error: seen.error ?? 'interrupted' };
    case 'accepted':
    case 'running':
      return null;
    default:
      return assertNever(seen.status, 'observed status');
  }
}

/** The moves that record how a turn ended (resend rules included). */
function endMoves(h: Moveable, end: TurnEnd, attemptId: string, workOpen: boolean, workState: HandoffRecord['workState'] = null): Move[] {
  const finished = { finished: true, observed: true } as const;
  switch (end.status) {
    case 'returned':
      return [
        [
          'turn_returned',
          {
            reason: end.result.summary.slice(0, 200),
            patch: { resultSummary: end.result.summary, result: end.result.output ?? null, deliveryDetail: null },
            updateAttempt: { id: attemptId, status: 'returned', ...finished },
            // Work the turn was about is returned with the turn's result, unless the agent
            // already returned (or the sender closed) it explicitly.
            ...(workState === 'open' || workState === 'claimed'
              ? { alsoWork: { current: workState, event: 'returned' as const, role: 'system' as const, reason: 'the turn returned a result' } }
              : {}),
          },
        ],
      ];
    case 'failed': {
      const event = eventAfterTurnError(h);
      return [
        [
          event,
          {
            reason: end.error,
            patch: { deliveryDetail: end.error },
            ...(event === 'turn_failed_resend' ? { increment: ['errorResends'] as const } : {}),
            updateAttempt: { id: attemptId, status: 'failed', error: end.error, ...finished },
          },
        ],
      ];
    }
    case 'interrupted': {
      const event = eventAfterInterruption(h, workOpen);
      const resend = event === 'turn_interrupted_resend';
      return [
        [
          event,
          {
            reason: end.error,
            patch: { deliveryDetail: end.error },
            ...(resend ? { notBeforeInMs: DELIVERY_POLICY.interruptResendDelayMs, increment: ['interruptResends'] as const } : {}),
            updateAttempt: { id: attemptId, status: 'interrupted', error: end.error, ...finished },
          },
        ],
      ];
    }
    case 'unobservable':
      return [['unobservable', { reason: end.error, updateAttempt: { id: attemptId, status: 'lost', error: end.error } }]];
    default:
      return assertNever(end, 'turn end');
  }
}

const started = (attemptId: string): Move => ['turn_started', { updateAttempt: { id: attemptId, status: 'running', observed: true } }];

/** One new turn for the head of the agent's queue. */
export async function deliver(deps: DispatchDeps, item: WorkItem, stop: AbortSignal): Promise<Step> {
  const record = item.handoff;
  let h = moveable(record);
  if (!item.recipient?.current) {
    await move(deps, h, [['recipient_gone', { reason: 'the recipient (or the session it had when the handoff was sent) no longer exists', patch: { deliveryDetail: 'recipient gone; not redirected' } }]]);
    return { kind: 'next' };
  }
  const adapter = deps.adapters.get(record.provider ?? '');
  if (!adapter) {
    deps.logger.error({ handoffId: record.id, provider: record.provider }, 'no adapter for this provider in this worker');
    return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
  }
  const target = targetOf(item);

  // Deliberate blocks: HELD, no attempt spent. The reconciler lifts the hold when it ends.
  const settings = await deps.settingsReader.get();
  const hold = holdReason(settings, record.connectionRule, deps.clock.now());
  if (hold) {
    await move(deps, h, [['held', { reason: hold, patch: { deliveryDetail: hold } }]]);
    return { kind: 'next' };
  }
  // Provider outage: stay WAITING with the explanation, no attempt spent, look again later.
  const status = await deps.outage.check(adapter.provider, settings.outageGuard[adapter.provider]);
  if (status.down) {
    const detail = `provider outage: ${status.detail ?? adapter.provider}`;
    if (record.deliveryDetail !== detail || h.deliveryState !== 'WAITING') {
      await move(deps, h, [['provider_outage', { reason: detail, patch: { deliveryDetail: detail } }]]);
    }
    return { kind: 'pause', retryInMs: deps.timing.outageRetryMs };
  }
  // A session busy with a turn Baton did not start is asked first. An adapter whose write
  // itself answers "busy" atomically is asked only for a handoff that already waited (BUSY):
  // a fresh one goes straight to the write, saving a round trip per turn, and a busy answer
  // then costs one attempt row, not one per retry.
  if (!adapter.reportsBusyOnSend || h.deliveryState !== 'WAITING') {
    let busy: boolean;
    try {
      busy = await adapter.isBusy(target, NEVER);
    } catch (err) {
      deps.logger.warn({ err, handoffId: record.id }, 'provider unreachable while checking busy; retrying later');
      return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
    }
    if (busy) {
      if (h.deliveryState === 'WAITING') {
        await move(deps, h, [['recipient_busy', { reason: 'the session reports it is in a turn', notBeforeInMs: deps.timing.busyRetryMs }]]);
      }
      return { kind: 'pause', retryInMs: deps.timing.busyRetryMs };
    }
  }

  // The attempt and its request id are committed before the write: a lost reply is UNCERTAIN.
  const attemptId = newId(deps.clock.now().getTime());
  const requestId = newId(deps.clock.now().getTime());
  const reserved = await move(deps, h, [
    [
      'attempt_reserved',
      {
        reason: `attempt ${h.attemptCount + 1}`,
        detail: { requestId },
        increment: ['attemptCount'],
        insertAttempt: { id: attemptId, number: h.attemptCount + 1, requestId, workerId: deps.workerId, deliveryTarget: record.deliveryTarget },
        patch: { deliveryDetail: null, notBefore: null },
        // What is queued behind this turn now waits for it, visibly.
        ...(record.recipientId ? { alsoQueued: { recipientId: record.recipientId, event: 'recipient_busy' as const, reason: 'another turn of the recipient is in progress' } } : {}),
      },
    ],
  ]);
  if (!reserved) return { kind: 'next' };
  h = reserved;

  const turn: TurnRequest = {
    requestId,
    handoffId: record.id,
    attempt: h.attemptCount,
    from: item.senderHandle,
    title: record.title,
    message: record.message,
    focus: record.focus,
    doneWhen: record.doneWhen,
    context: { summary: record.contextSummary, openQuestions: record.openQuestions, nextSteps: record.nextSteps },
    packet: (await contextPacketFor(deps, record, item.senderHandle)).text,
  };
  // The write itself is never aborted: once started, its outcome must be recorded.
  const sent = await adapter.sendTurn(target, turn, NEVER);
  const attempt = (status: AttemptUpdate['status'], extra: Partial<AttemptUpdate> = {}): AttemptUpdate => ({ id: attemptId, status, ...extra });
  switch (sent.outcome) {
    case 'accepted': {
      const accepted: Move = ['turn_accepted', { updateAttempt: attempt('accepted', { accepted: true, observed: true }) }];
      // Look once right away: a short turn is often over already, and then its acceptance,
      // run and end are written together (one statement instead of three).
      let seen: TurnObservation | null = sent.seen ?? null;
      if (!seen) {
        try {
          seen = await adapter.observeTurn(target, requestId, NEVER);
        } catch {
          seen = null;
        }
      }
      const end = seen ? endOf(seen) : null;
      if (end) {
        await move(deps, h, [accepted, started(attemptId), ...endMoves(h, end, attemptId, isWorkOpen(record), record.workState)]);
        return { kind: 'next' };
      }
      const running = seen?.found === true && seen.status === 'running';
      const now = await move(deps, h, running ? [accepted, started(attemptId)] : [accepted]);
      if (!now) return { kind: 'next' };
      return watch(deps, now, attemptId, requestId, adapter, target, stop, record, null);
    }
    case 'busy':
      await move(deps, h, [['session_busy', { reason: sent.detail ?? 'the session is in a turn', notBeforeInMs: deps.timing.busyRetryMs, updateAttempt: attempt('busy', { finished: true }) }]]);
      return { kind: 'pause', retryInMs: deps.timing.busyRetryMs };
    case 'rejected': {
      const refused: Move = ['owner_rejected', { reason: sent.reason, increment: ['refusals'], patch: { deliveryDetail: sent.reason }, updateAttempt: attempt('rejected', { error: sent.reason, finished: true }) }];
      const spent = refusalBudgetSpent({ ...h, refusals: h.refusals + 1 });
      await move(deps, h, spent ? [refused, ['rejected_twice', { reason: `refused ${h.refusals + 1} times` }]] : [refused]);
      return { kind: 'next' };
    }
    case 'not_sent': {
      const event = eventAfterNotSent(h);
      await move(deps, h, [
        [
          event,
          {
            reason: sent.error,
            increment: ['errorResends'],
            patch: { deliveryDetail: sent.error },
            ...(event === 'send_failed' ? { notBeforeInMs: deps.timing.unreachableRetryMs } : {}),
            updateAttempt: attempt('not_sent', { error: sent.error, finished: true }),
          },
        ],
      ]);
      return event === 'send_failed' ? { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs } : { kind: 'next' };
    }
    case 'gone':
      await move(deps, h, [['recipient_gone', { reason: sent.reason, patch: { deliveryDetail: sent.reason }, updateAttempt: attempt('cancelled', { error: sent.reason, finished: true }) }]]);
      return { kind: 'next' };
    case 'lost':
      await move(deps, h, [
        ['reply_lost', { reason: sent.error, patch: { deliveryDetail: 'the write may have landed; reconciling by observation, never resent blindly' }, updateAttempt: attempt('lost', { error: sent.error }) }],
      ]);
      return { kind: 'next' };
    default:
      return assertNever(sent, 'send outcome');
  }
}

/** A turn an earlier lock holder left live (it died, lost its lock, or handed it back). */
export async function resumeTurn(deps: DispatchDeps, item: WorkItem, stop: AbortSignal): Promise<Step> {
  const record = item.handoff;
  const h = moveable(record);
  if (record.deliveryState === 'SENDING' || !item.attempt) {
    // Whoever reserved this write is gone mid-send: it may have landed. Never resend blindly.
    await move(deps, h, [
      [
        'reply_lost',
        {
          reason: 'the worker that was writing this turn stopped before recording the outcome',
          patch: { deliveryDetail: 'the write may have landed; reconciling by observation, never resent blindly' },
          ...(item.attempt ? { updateAttempt: { id: item.attempt.id, status: 'lost' as const, error: 'writer stopped' } } : {}),
        },
      ],
    ]);
    return { kind: 'next' };
  }
  const adapter = deps.adapters.get(record.provider ?? '');
  if (!adapter) return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
  return watch(deps, h, item.attempt.id, item.attempt.requestId, adapter, targetOf(item), stop, record, item.attempt.acceptedAt ?? item.attempt.startedAt);
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
  record: HandoffRecord,
  /** When the turn was last known to be accepted (for the unobservable rule). */
  since: Date | null,
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
          const running = await move(deps, h, [started(attemptId)]);
          if (running) h = running;
        },
      },
      watching,
    );
  } catch (err) {
    if (released.signal.aborted && !stop.aborted) return { kind: 'next' };
    if (stop.aborted) return { kind: 'stopped' };
    // Nobody can observe the turn right now. Past the limit, it is UNCERTAIN; else retry later.
    const from = since ?? deps.clock.now();
    if (deps.clock.now().getTime() - from.getTime() >= DELIVERY_POLICY.unobservableAfterMs) {
      await move(deps, h, [['unobservable', { reason: `nobody could observe the turn: ${(err as Error).message}`, updateAttempt: { id: attemptId, status: 'lost' } }]]);
      return { kind: 'next' };
    }
    deps.logger.warn({ err, handoffId: h.id, requestId }, 'could not observe the turn; retrying later');
    return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
  } finally {
    clearInterval(recheck);
  }
  const moves = endMoves(h, end, attemptId, isWorkOpen(record), record.workState);
  await move(deps, h, h.deliveryState === 'ACCEPTED' && end.status !== 'unobservable' ? [started(attemptId), ...moves] : moves);
  return { kind: 'next' };
}
