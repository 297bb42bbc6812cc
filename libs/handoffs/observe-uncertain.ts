import { absenceScanSpacingMs } from '../domain/delivery-policy.ts';
import { hasErrorCode } from '../domain/errors.ts';
import { failedLookRetryMs, INCOMPLETE_SCAN_RETRY_MS } from '../domain/observation-retry.ts';
import type { DeliveryEvent } from '../domain/transitions.ts';
import type { UncertainCandidate } from '../db/uncertain-due.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { applyTransition, applyTransitions, type HandoffAtRevision, type TransitionOptions } from './apply-transition.ts';
import { endMoves } from './turn-end-moves.ts';
import { reportsUsage } from '../domain/turn-usage.ts';
import type { DispatchDeps } from './dispatch-deps.ts';
import { SYSTEM_ACTOR } from './ports.ts';
import { routeOf } from '../queue/dispatch-job.ts';

/** What observing one UNCERTAIN handoff touches: its recipient and adapter, the moves, the rescan job, the windows. */
export type ObserveDeps = Pick<
  DispatchDeps,
  'handoffs' | 'agents' | 'adapters' | 'scheduler' | 'events' | 'clock' | 'logger' | 'workerId' | 'windows'
>;

/** Longest error text kept in a failed look's event reason. */
const REASON_ERROR_CHARS = 200;

/**
 * Honest release, for one UNCERTAIN handoff: it is settled only by what its session's history
 * shows. Found: it continues from what was seen (accepted, running, or returned; a turn that
 * already ended in error is followed through RUNNING so the normal resend rules apply). Not
 * found by `windows.absenceScans` complete scans spread over `windows.absenceWindowMs` (by
 * default three over an hour): CANCELLED, never resent. An incomplete scan does not count and
 * comes back after INCOMPLETE_SCAN_RETRY_MS; a look that failed outright (the adapter threw)
 * does not count either and moves the next scan by a growing back-off (`failedLookRetryMs`,
 * recorded as `detail.failedLooks` on its `scan_missed` event), so it never comes back ahead of
 * the others. A look cut short by `signal` (the reconciler stopping) writes nothing.
 * @returns 1 when the handoff moved or its scan was recorded, else 0.
 * @throws what Postgres throws while recording (a `stale_revision` is someone else's move: 0).
 */
export async function observeUncertain(deps: ObserveDeps, c: UncertainCandidate, signal: AbortSignal): Promise<number> {
  const { absenceScans, absenceWindowMs } = deps.windows;
  const adapter = deps.adapters.get(c.handoff.provider ?? '');
  if (!adapter || !c.requestId || !c.attemptId || !c.handoff.recipientId) return 0;
  const agent = await deps.agents.findById(c.handoff.recipientId);
  const target = {
    agentId: c.handoff.recipientId,
    handle: agent?.handle ?? '',
    target: c.handoff.deliveryTarget,
    settings: agent?.providerSettings ?? {},
  };
  const h: HandoffAtRevision = c.handoff;
  let touched = 0;
  const move = async (event: DeliveryEvent, opts: TransitionOptions) => {
    try {
      const moved = await applyTransition(deps, h, event, { ...SYSTEM_ACTOR, id: deps.workerId }, opts);
      touched = 1;
      return moved;
    } catch (err) {
      if (hasErrorCode(err, 'stale_revision')) return null;
      throw err;
    }
  };
  let seen;
  try {
    seen = await adapter.observeTurn(target, c.requestId, signal);
  } catch (err) {
    if (signal.aborted) return 0;
    const failedLooks = c.failedLooks + 1;
    const retryMs = failedLookRetryMs(failedLooks, deps.windows);
    deps.logger.warn({ err, handoffId: c.handoff.id, failedLooks, retryMs }, 'could not scan the session history; will try again');
    const why = (err instanceof Error ? err.message : String(err)).slice(0, REASON_ERROR_CHARS);
    await move('scan_missed', {
      reason: `could not look at the session history (${why}); it does not count; next look in ${Math.round(retryMs / 1000)} s`,
      detail: { complete: false, failedLooks },
      notBeforeInMs: retryMs,
    });
    return touched;
  }
  if (seen.found) {
    if (seen.status === 'returned') {
      await move('observed_returned', {
        reason: 'found in the session history: finished',
        patch: { resultSummary: seen.result?.summary ?? null, result: seen.result?.output ?? null, deliveryDetail: null },
        updateAttempt: {
          id: c.attemptId,
          status: 'returned',
          finished: true,
          accepted: true,
          observed: true,
          ...(reportsUsage(seen.usage) ? { usage: seen.usage } : {}),
        },
        ...(c.handoff.workState === 'open' || c.handoff.workState === 'claimed'
          ? {
              moveWork: {
                current: c.handoff.workState,
                event: 'returned' as const,
                role: 'system' as const,
                reason: 'the turn found in the history returned a result',
              },
            }
          : {}),
      });
      return touched;
    }
    if (seen.status === 'busy' || seen.status === 'rejected') {
      // Found, and it provably did nothing: settled exactly as the same answer to the write.
      const end =
        seen.status === 'busy'
          ? ({ status: 'busy', detail: seen.error ?? 'busy; nothing done' } as const)
          : ({ status: 'rejected', reason: seen.error ?? 'refused' } as const);
      try {
        await applyTransitions(deps, h, endMoves(h, end, c.attemptId, true, c.handoff.workState, 0, deps.windows), {
          ...SYSTEM_ACTOR,
          id: deps.workerId,
        });
        touched = 1;
      } catch (err) {
        if (!hasErrorCode(err, 'stale_revision')) throw err;
      }
      return touched;
    }
    const event = seen.status === 'accepted' ? 'observed_accepted' : 'observed_running';
    const moved = await move(event, {
      reason: `found in the session history: ${seen.status}`,
      patch: { deliveryDetail: null },
      updateAttempt: { id: c.attemptId, status: seen.status === 'accepted' ? 'accepted' : 'running', accepted: true, observed: true },
    });
    // The agent's next lock holder follows the turn to its end (resend rules included).
    if (moved && c.handoff.provider) {
      await deps.scheduler.enqueue(
        {
          ...routeOf({ recipientId: c.handoff.recipientId, provider: c.handoff.provider, pool: c.handoff.pool }),
          cause: 'due',
          handoffId: h.id,
        },
        JOB_IDS.observed(h.id, moved.revision),
      );
    }
    return touched;
  }
  if (!seen.complete) {
    await move('scan_missed', {
      reason: 'the history scan was incomplete; it does not count',
      detail: { complete: false },
      notBeforeInMs: INCOMPLETE_SCAN_RETRY_MS,
    });
    return touched;
  }
  const scans = c.absentScans + 1;
  const firstAt = c.firstAbsentAt ?? deps.clock.now();
  const proven = scans >= absenceScans && deps.clock.now().getTime() - firstAt.getTime() >= absenceWindowMs;
  if (proven) {
    await move('proven_absent', {
      reason: `${scans} complete scans over ${Math.round((deps.clock.now().getTime() - firstAt.getTime()) / 60_000)} minutes never found request ${c.requestId}; not resent`,
      patch: { deliveryDetail: 'never received (proven by history scans); not resent' },
      updateAttempt: { id: c.attemptId, status: 'cancelled', finished: true, absentScan: true },
    });
  } else {
    await move('scan_missed', {
      reason: `complete scan ${scans} of ${absenceScans}: request ${c.requestId} not in the session history`,
      detail: { complete: true, scan: scans },
      notBeforeInMs: absenceScanSpacingMs(deps.windows),
      updateAttempt: { id: c.attemptId, status: 'lost', absentScan: true },
    });
  }
  return touched;
}
