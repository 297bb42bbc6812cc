/**
 * One step of a dispatch run: a new turn for the head of the agent's queue (`deliver`: the
 * checks, the reservation, the one write and its answer), or a turn an earlier lock holder
 * left live (`resumeTurn`).
 */
import { refusalBudgetSpent } from '../domain/delivery-policy.ts';
import { assertNever } from '../domain/errors.ts';
import { holdReason } from '../domain/runtime-settings.ts';
import {
  endOfObservation,
  type DeliveryTarget,
  type ProviderAdapter,
  type TurnObservation,
  type TurnRequest,
} from '../adapters/provider-adapter.ts';
import type { AttemptUpdate, WorkItem } from '../db/handoff-repository.ts';
import { type HandoffAtRevision } from './apply-transition.ts';
import { AttemptReservations, type WriteLock } from './attempt-reservations.ts';
import type { DispatchDeps } from './dispatch-deps.ts';
import { contextPacketFor } from './manage-sessions.ts';
import { earlierRequestsFor } from './earlier-requests.ts';
import { didNothing, endMoves, started, type Move } from './turn-end-moves.ts';
import { busyAtWrite, busyRetryInMs, notSent, turnAttempt, writeHistory } from './write-retries.ts';
import { isWorkOpen, move, atRevision, NEVER, targetOf, type Step } from './turn-step.ts';
import { endTurn, watch, type FollowDeps } from './follow-turn.ts';

/** What delivering a turn touches: following it, and what its write reads and is checked against. */
export type DeliverDeps = FollowDeps &
  Pick<DispatchDeps, 'adapters' | 'settingsReader' | 'budgetGate' | 'outage' | 'unwritten' | 'hooks' | 'sessions' | 'sessionTurns'>;

/** One new turn for the head of the agent's queue. */
export async function deliver(deps: DeliverDeps, item: WorkItem, stop: AbortSignal, lock: WriteLock): Promise<Step> {
  const record = item.handoff;
  if (item.reserved) {
    // The statement that read this head reserved its attempt (AttemptReservations.withHead made the checks).
    const adapter = deps.adapters.get(record.provider ?? '');
    if (!adapter) return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
    const reserved = AttemptReservations.reservedHead({ ...item, reserved: item.reserved });
    return sendReserved(deps, item, reserved, item.reserved.attemptId, item.reserved.requestId, adapter, targetOf(item), stop, lock);
  }
  const h = atRevision(record);
  if (!item.recipient?.current) {
    await move(deps, h, [
      [
        'recipient_gone',
        {
          reason: 'the recipient (or the session it had when the handoff was sent) no longer exists',
          patch: { deliveryDetail: 'recipient gone; not redirected' },
        },
      ],
    ]);
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
  // A budget spent (libs/domain/budgets.ts): HELD the same way, until the next window or a higher budget.
  const budget = record.recipientId ? await deps.budgetGate.holdFor(record.recipientId) : null;
  if (budget) {
    await move(deps, h, [['held', { reason: budget, detail: { hold: 'budget' }, patch: { deliveryDetail: budget } }]]);
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
  // So is any handoff while another of the recipient is UNCERTAIN: that turn may still be
  // running in the session, and a write would arrive in the middle of it.
  if (!adapter.reportsBusyOnSend || h.deliveryState !== 'WAITING' || item.uncertainTurn) {
    let busy: boolean;
    try {
      busy = await adapter.isBusy(target, NEVER);
    } catch (err) {
      deps.logger.warn({ err, handoffId: record.id }, 'provider unreachable while checking busy; retrying later');
      return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
    }
    if (busy) {
      if (h.deliveryState === 'WAITING') {
        await move(deps, h, [
          ['recipient_busy', { reason: 'the session reports it is in a turn', notBeforeInMs: deps.timing.busyRetryMs }],
        ]);
      }
      return { kind: 'pause', retryInMs: deps.timing.busyRetryMs };
    }
  }

  // The attempt and its request id are committed before the write: a lost reply is UNCERTAIN.
  // A reply of this statement lost with its connection throws: the run settles it (AttemptReservations.settle).
  const { move: reservation, attemptId, requestId } = lock.reservations.apart(h, record);
  const reserved = await move(deps, h, [reservation]);
  lock.reservations.apartAnswered(requestId, reserved);
  if (!reserved) {
    // Refused: someone moved the handoff first, or a newer lock holder reserved for this agent
    // (the fence). In the second case this worker lost its lock: stop instead of retrying.
    return (await lock.stillHeld()) ? { kind: 'next' } : { kind: 'stopped' };
  }
  return sendReserved(deps, item, reserved, attemptId, requestId, adapter, target, stop, lock);
}

/** Writes a reserved attempt to the session (the one write it gets) and records the answer. */
async function sendReserved(
  deps: DeliverDeps,
  item: WorkItem,
  reserved: HandoffAtRevision,
  attemptId: string,
  requestId: string,
  adapter: ProviderAdapter,
  target: DeliveryTarget,
  stop: AbortSignal,
  lock: WriteLock,
): Promise<Step> {
  const record = item.handoff;
  const h = reserved;
  // Prompts of earlier turns that got no answer stay in sessions that keep them: the turn says
  // what it replaces and what was given up, so the model acts on neither again.
  const earlier = await earlierRequestsFor(deps, record, requestId, adapter.sessionKeepsPrompts === true);
  // What this handoff's earlier writes came to (none read for its first): the turn's attempt
  // number, and how a busy or unsent answer to this write is retried.
  const history = await writeHistory(deps, record.id, h.attemptCount);
  const turn: TurnRequest = {
    requestId,
    handoffId: record.id,
    attempt: turnAttempt(history),
    from: item.senderHandle,
    title: record.title,
    message: record.message,
    focus: record.focus,
    doneWhen: record.doneWhen,
    context: { summary: record.contextSummary, openQuestions: record.openQuestions, nextSteps: record.nextSteps },
    packet: (await contextPacketFor(deps, record, item.senderHandle)).text,
    ...(earlier ? { earlier } : {}),
  };
  // Only the lock's current holder may write: prove it right before the write (a bounded Redis
  // call). A holder cut off from Redis, or overtaken, writes nothing and says so.
  await deps.hooks?.beforeWrite?.(record.recipientId ?? '');
  if (!(await lock.stillHeld())) {
    return lock.reservations.settle({
      kind: 'not-written',
      h,
      attemptId,
      requestId,
      reason: 'the turn lock was lost before the write; nothing was written',
    });
  }
  // The write itself is never aborted: once started, its outcome must be recorded.
  deps.unwritten.delete(requestId);
  const wroteAt = deps.clock.now();
  const sent = await adapter.sendTurn(target, turn, NEVER);
  const attempt = (status: AttemptUpdate['status'], extra: Partial<AttemptUpdate> = {}): AttemptUpdate => ({
    id: attemptId,
    status,
    ...extra,
  });
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
      const end = seen ? endOfObservation(seen) : null;
      if (end) {
        const ended = endMoves(
          h,
          end,
          attemptId,
          isWorkOpen(record),
          record.workState,
          end.status === 'busy' ? busyRetryInMs(deps, history) : 0,
          deps.windows,
        );
        // The end of the turn and the choice of the next one: one statement.
        return endTurn(deps, h, didNothing(end) ? [accepted, ...ended] : [accepted, started(attemptId), ...ended], record, lock);
      }
      const running = seen?.found === true && seen.status === 'running';
      const now = await move(deps, h, running ? [accepted, started(attemptId)] : [accepted]);
      if (!now) return { kind: 'next' };
      return watch(deps, now, attemptId, requestId, adapter, target, stop, record, null, lock, history);
    }
    case 'busy': {
      // A growing back-off per busy answer in a row; never sooner than the recipient's own Retry-After.
      const busy = busyAtWrite(deps, history, attemptId, sent.detail ?? 'the session is in a turn', sent.retryAfterMs);
      await move(deps, h, [busy.move]);
      return { kind: 'pause', retryInMs: busy.retryInMs };
    }
    case 'rejected': {
      const refused: Move = [
        'owner_rejected',
        {
          reason: sent.reason,
          increment: ['refusals'],
          patch: { deliveryDetail: sent.reason },
          updateAttempt: attempt('rejected', { error: sent.reason, finished: true }),
        },
      ];
      const spent = refusalBudgetSpent({ ...h, refusals: h.refusals + 1 });
      await move(deps, h, spent ? [refused, ['rejected_twice', { reason: `refused ${h.refusals + 1} times` }]] : [refused]);
      return { kind: 'next' };
    }
    case 'not_sent': {
      // Nothing left Baton: the recipient is unreachable. Held with a growing back-off, no
      // attempt budget spent, until it has been unreachable past the give-up time.
      const unsent = notSent(deps, history, attemptId, sent.error, wroteAt);
      await move(deps, h, [unsent.move]);
      return unsent.retryInMs !== null ? { kind: 'pause', retryInMs: unsent.retryInMs } : { kind: 'next' };
    }
    case 'gone':
      await move(deps, h, [
        [
          'recipient_gone',
          {
            reason: sent.reason,
            patch: { deliveryDetail: sent.reason },
            updateAttempt: attempt('cancelled', { error: sent.reason, finished: true }),
          },
        ],
      ]);
      return { kind: 'next' };
    case 'lost':
      await move(deps, h, [
        [
          'reply_lost',
          {
            reason: sent.error,
            patch: { deliveryDetail: 'the write may have landed; reconciling by observation, never resent blindly' },
            updateAttempt: attempt('lost', { error: sent.error }),
          },
        ],
      ]);
      return { kind: 'next' };
    default:
      return assertNever(sent, 'send outcome');
  }
}

/** A turn an earlier lock holder left live (it died, lost its lock, or stopped following it at shutdown). */
export async function resumeTurn(deps: DeliverDeps, item: WorkItem, stop: AbortSignal, lock: WriteLock): Promise<Step> {
  const record = item.handoff;
  const h = atRevision(record);
  if (record.deliveryState === 'SENDING' && item.attempt && deps.unwritten.has(item.attempt.requestId)) {
    // This process reserved the attempt and never handed it to an adapter (the reservation's
    // reply was lost): provably never written, so it goes out now, under its own request id.
    const adapter = deps.adapters.get(record.provider ?? '');
    if (!adapter) return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
    if (!item.recipient?.current) {
      deps.unwritten.delete(item.attempt.requestId);
      const reason = 'the recipient (or the session it had when the handoff was sent) no longer exists';
      await move(deps, h, [
        [
          'recipient_gone',
          {
            reason,
            patch: { deliveryDetail: 'recipient gone; not redirected' },
            updateAttempt: { id: item.attempt.id, status: 'cancelled', error: reason, finished: true },
          },
        ],
      ]);
      return { kind: 'next' };
    }
    return sendReserved(deps, item, h, item.attempt.id, item.attempt.requestId, adapter, targetOf(item), stop, lock);
  }
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
  return watch(
    deps,
    h,
    item.attempt.id,
    item.attempt.requestId,
    adapter,
    targetOf(item),
    stop,
    record,
    item.attempt.acceptedAt ?? item.attempt.startedAt,
    lock,
  );
}
