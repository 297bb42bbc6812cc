import { setTimeout as sleep } from 'node:timers/promises';
import { refusalBudgetSpent } from '../domain/delivery-policy.ts';
import { assertNever } from '../domain/errors.ts';
import { planTransition } from '../domain/transitions.ts';
import { QUEUED_BEHIND_REASON, SETTLE_TRIES } from './reserve-head.ts';
import { newId } from '../domain/ids.ts';
import { holdReason } from '../domain/runtime-settings.ts';
import { endOfObservation, type DeliveryTarget, type ProviderAdapter, type TurnObservation, type TurnRequest } from '../adapters/provider-adapter.ts';
import type { AttemptUpdate, WorkItem } from '../db/handoff-repository.ts';
import { isDatabaseUnavailable } from '../db/classify-error.ts';
import { type Moveable } from './apply-transition.ts';
import type { DispatchDeps } from './dispatch-deps.ts';
import { routeOf } from '../queue/dispatch-job.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { contextPacketFor } from './manage-sessions.ts';
import { earlierRequestsFor } from './earlier-requests.ts';
import { didNothing, endMoves, started, type Move } from './turn-end-moves.ts';
import { busyAtWrite, busyRetryInMs, notSent, turnAttempt, writeHistory } from './write-retries.ts';
import { endTurn, isWorkOpen, move, moveable, NEVER, targetOf, type Step, type WriteLock } from './turn-step.ts';
import { watch } from './follow-turn.ts';

/** One new turn for the head of the agent's queue. */
export async function deliver(deps: DispatchDeps, item: WorkItem, stop: AbortSignal, lock: WriteLock): Promise<Step> {
  const record = item.handoff;
  if (item.reserved) {
    // The statement that read this head reserved its attempt (HeadReserver made the checks).
    const adapter = deps.adapters.get(record.provider ?? '');
    if (!adapter) return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
    const reserved: Moveable = {
      ...moveable(record),
      deliveryState: planTransition(record.deliveryState, 'attempt_reserved', 'system'),
      revision: item.reserved.revision,
      attemptCount: record.attemptCount + 1,
    };
    return sendReserved(deps, item, reserved, item.reserved.attemptId, item.reserved.requestId, adapter, targetOf(item), stop, lock);
  }
  const h = moveable(record);
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
        await move(deps, h, [['recipient_busy', { reason: 'the session reports it is in a turn', notBeforeInMs: deps.timing.busyRetryMs }]]);
      }
      return { kind: 'pause', retryInMs: deps.timing.busyRetryMs };
    }
  }

  // The attempt and its request id are committed before the write: a lost reply is UNCERTAIN.
  const attemptId = newId(deps.clock.now().getTime());
  const requestId = newId(deps.clock.now().getTime());
  const reservation: Move = [
    'attempt_reserved',
    {
      reason: `attempt ${h.attemptCount + 1}`,
      detail: { requestId },
      increment: ['attemptCount'],
      // The lock's fencing number: Postgres refuses the reservation if a newer holder reserved.
      insertAttempt: { id: attemptId, number: h.attemptCount + 1, requestId, workerId: deps.workerId, deliveryTarget: record.deliveryTarget, fence: lock.fence },
      patch: { deliveryDetail: null, notBefore: null },
      // What is queued behind this turn now waits for it, visibly.
      ...(record.recipientId ? { alsoQueued: { recipientId: record.recipientId, event: 'recipient_busy' as const, reason: QUEUED_BEHIND_REASON } } : {}),
    },
  ];
  deps.unsent.add(requestId);
  let reserved: Moveable | null;
  try {
    reserved = await move(deps, h, [reservation]);
  } catch (err) {
    if (!isDatabaseUnavailable(err)) throw err;
    // The reply was lost, not necessarily the statement: read back what committed.
    const settled = await settleReservation(deps, record.id, requestId, stop);
    if (settled.kind !== 'reserved') return settled.step;
    reserved = settled.h;
  }
  if (!reserved) {
    deps.unsent.handOver(requestId);
    // Refused: someone moved the handoff first, or a newer lock holder reserved for this agent
    // (the fence). In the second case this worker lost its lock: stop instead of retrying.
    return (await lock.stillHeld()) ? { kind: 'next' } : { kind: 'stopped' };
  }
  return sendReserved(deps, item, reserved, attemptId, requestId, adapter, target, stop, lock);
}

/**
 * The reservation statement failed with its connection (reply lost, or Postgres away): it may
 * or may not have committed. Re-reads the handoff under the still-held turn lock, a bounded
 * number of times while Postgres is away, and settles it by what committed: our request id,
 * still SENDING, means the attempt is reserved and provably unsent (send it); no such attempt
 * means the reservation did not happen. In that case, and when Postgres stays away, the id
 * stays in `deps.unsent`: should the lost statement still commit, this process sends the
 * attempt when it next holds the agent's lock, while any other holder rightly sees UNCERTAIN.
 */
async function settleReservation(
  deps: DispatchDeps,
  handoffId: string,
  requestId: string,
  stop: AbortSignal,
): Promise<{ kind: 'reserved'; h: Moveable } | { kind: 'settled'; step: Step }> {
  for (let attempt = 1; ; attempt++) {
    try {
      const [row, latest] = await Promise.all([deps.handoffs.findById(handoffId), deps.handoffs.latestAttempt(handoffId)]);
      if (!row || latest?.requestId !== requestId) {
        deps.logger.info({ handoffId, requestId }, 'the attempt reservation did not commit');
        return { kind: 'settled', step: { kind: 'next' } };
      }
      if (row.deliveryState === 'UNCERTAIN') {
        // A new lock holder took the reservation (committed, its reply lost) for an abandoned
        // write; this process never handed it to an adapter, so it can prove it unsent.
        deps.unsent.handOver(requestId);
        await recordUnwritten(deps, null, latest.id, requestId, 'the reservation committed but its reply was lost, and the write was never started', handoffId);
        return { kind: 'settled', step: { kind: 'next' } };
      }
      if (row.deliveryState !== 'SENDING' || latest.status !== 'sending') return { kind: 'settled', step: { kind: 'next' } };
      deps.logger.info({ handoffId, requestId }, 'the attempt reservation committed although its reply was lost; sending it');
      return { kind: 'reserved', h: moveable(row) };
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      if (attempt >= SETTLE_TRIES || stop.aborted) {
        deps.logger.warn({ err, handoffId, requestId }, 'could not read back the attempt reservation; leaving it to the next lock holder');
        return { kind: 'settled', step: stop.aborted ? { kind: 'stopped' } : { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs } };
      }
      // An abort (shutdown) only ends the wait early; the next try sees `stop`.
      await sleep(deps.timing.unreachableRetryMs, undefined, { signal: stop }).catch(() => undefined);
    }
  }
}

/** Writes a reserved attempt to the session (the one write it gets) and records the answer. */
async function sendReserved(
  deps: DispatchDeps,
  item: WorkItem,
  reserved: Moveable,
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
    deps.unsent.handOver(requestId);
    await recordUnwritten(deps, h, attemptId, requestId, 'the turn lock was lost before the write; nothing was written');
    return { kind: 'stopped' };
  }
  // The write itself is never aborted: once started, its outcome must be recorded.
  deps.unsent.handOver(requestId);
  const wroteAt = deps.clock.now();
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
      const end = seen ? endOfObservation(seen) : null;
      if (end) {
        const ended = endMoves(h, end, attemptId, isWorkOpen(record), record.workState, end.status === 'busy' ? busyRetryInMs(deps, history) : 0, deps.windows);
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
      const refused: Move = ['owner_rejected', { reason: sent.reason, increment: ['refusals'], patch: { deliveryDetail: sent.reason }, updateAttempt: attempt('rejected', { error: sent.reason, finished: true }) }];
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

/**
 * This worker reserved an attempt and will not write it (it lost the turn lock first): only it
 * can prove the write never happened, so it records that itself. Normally `lock_lost` (SENDING ->
 * WAITING). If a new lock holder got there first and marked the attempt UNCERTAIN ("its writer
 * stopped mid-send"), `unsent_proven` (UNCERTAIN -> WAITING) instead of leaving it to the history
 * scans, which would end it CANCELLED; the handoff goes out again under a new request id. A
 * move that lands first (a history scan marking the attempt missing) only makes it read again.
 * Postgres may be away right then (the fault that cost the lock often cuts it off too), and
 * nobody else can ever make this proof: it is retried, bounded as a lost reservation's read-back
 * is (SETTLE_TRIES, `timing.unreachableRetryMs` apart), whether or not the worker is stopping.
 * Whatever else moved the handoff stands.
 * `h` null: start from the proof (the reservation's reply was lost; its row is re-read).
 */
async function recordUnwritten(deps: DispatchDeps, h: Moveable | null, attemptId: string, requestId: string, reason: string, handoffId = h?.id ?? ''): Promise<void> {
  let current = h;
  for (let attempt = 1; attempt <= SETTLE_TRIES; attempt++) {
    try {
      if (current) {
        const moved = await move(deps, current, [['lock_lost', { reason, patch: { deliveryDetail: null }, updateAttempt: { id: attemptId, status: 'not_sent', error: reason, finished: true } }]]);
        if (moved) return;
        current = null;
      }
      const [row, latest] = await Promise.all([deps.handoffs.findById(handoffId), deps.handoffs.latestAttempt(handoffId)]);
      if (!row || latest?.requestId !== requestId) return;
      if (row.deliveryState === 'SENDING' && latest.status === 'sending') {
        // Our lock_lost committed nowhere yet (its reply was lost before it ran): try it again.
        current = moveable(row);
        continue;
      }
      if (row.deliveryState !== 'UNCERTAIN') return;
      const moved = await move(deps, moveable(row), [
        ['unsent_proven', { reason: `the worker that reserved attempt ${latest.number} proves it never wrote it: ${reason}`, patch: { deliveryDetail: null }, updateAttempt: { id: attemptId, status: 'not_sent', error: reason, finished: true } }],
      ]);
      // Moved by someone else since the read (a history scan's scan_missed keeps it UNCERTAIN
      // with a later revision): read it again; only this worker can make the proof.
      if (!moved) continue;
      if (row.recipientId && row.provider) {
        await deps.scheduler.enqueue({ ...routeOf({ recipientId: row.recipientId, provider: row.provider, pool: row.pool }), cause: 'due', handoffId }, JOB_IDS.unsentProven(handoffId, moved.revision)).catch((err: unknown) => {
          deps.logger.warn({ err, handoffId }, 'could not queue the proven-unsent handoff; the sweep will');
        });
      }
      return;
    } catch (err) {
      if (!isDatabaseUnavailable(err) || attempt >= SETTLE_TRIES) {
        deps.logger.warn({ err, handoffId }, 'could not record an attempt this worker never wrote; reconciliation will');
        return;
      }
      // Not cut short by the lost lock (that is why we are here) nor by a shutdown: bounded,
      // and the only chance this handoff has not to end CANCELLED.
      await sleep(deps.timing.unreachableRetryMs);
    }
  }
}

/** A turn an earlier lock holder left live (it died, lost its lock, or handed it back). */
export async function resumeTurn(deps: DispatchDeps, item: WorkItem, stop: AbortSignal, lock: WriteLock): Promise<Step> {
  const record = item.handoff;
  const h = moveable(record);
  if (record.deliveryState === 'SENDING' && item.attempt && deps.unsent.has(item.attempt.requestId)) {
    // This process reserved the attempt and never handed it to an adapter (the reservation's
    // reply was lost): provably unsent, so it goes out now, under its own request id.
    const adapter = deps.adapters.get(record.provider ?? '');
    if (!adapter) return { kind: 'pause', retryInMs: deps.timing.unreachableRetryMs };
    if (!item.recipient?.current) {
      deps.unsent.handOver(item.attempt.requestId);
      const reason = 'the recipient (or the session it had when the handoff was sent) no longer exists';
      await move(deps, h, [['recipient_gone', { reason, patch: { deliveryDetail: 'recipient gone; not redirected' }, updateAttempt: { id: item.attempt.id, status: 'cancelled', error: reason, finished: true } }]]);
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
  return watch(deps, h, item.attempt.id, item.attempt.requestId, adapter, targetOf(item), stop, record, item.attempt.acceptedAt ?? item.attempt.startedAt, lock);
}
