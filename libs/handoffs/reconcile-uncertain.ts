import { absenceScanSpacingMs } from '../domain/delivery-policy.ts';
import { hasErrorCode } from '../domain/errors.ts';
import type { DeliveryEvent } from '../domain/transitions.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { applyTransition, applyTransitions, type Moveable, type TransitionOptions } from './apply-transition.ts';
import { endMoves } from './deliver-turn.ts';
import type { DispatchDeps } from './dispatch-agent.ts';
import { SYSTEM_ACTOR } from './ports.ts';
import { routeOf } from '../queue/dispatch-job.ts';

const BATCH = 100;
/** After a scan that could not read the whole history (it does not count). */
const INCOMPLETE_SCAN_RETRY_MS = 5 * 60_000;

type Deps = Pick<DispatchDeps, 'handoffs' | 'agents' | 'adapters' | 'scheduler' | 'events' | 'clock' | 'logger' | 'workerId' | 'windows' | 'scope' | 'deployment'>;

/**
 * Honest release: an UNCERTAIN delivery is settled only by what its session's history shows.
 * Found: it continues from what was seen (accepted, running, or returned; a turn that already
 * ended in error is followed through RUNNING so the normal resend rules apply). Not found by
 * `windows.absenceScans` complete scans spread over `windows.absenceWindowMs` (by default three
 * over an hour): CANCELLED, never resent. Runs in every worker's
 * reconciler for the providers that worker has adapters for, and only for agents of its own
 * deployment (another deployment's UNCERTAIN turns are its own to observe).
 * @returns how many UNCERTAIN handoffs moved or were scanned.
 */
export async function reconcileUncertain(deps: Deps, signal: AbortSignal = new AbortController().signal): Promise<number> {
  const { absenceScans, absenceWindowMs } = deps.windows;
  const due = await deps.handoffs.uncertainDue(deps.clock.now(), BATCH, deps.deployment, deps.scope);
  let touched = 0;
  for (const c of due) {
    const adapter = deps.adapters.get(c.handoff.provider ?? '');
    if (!adapter || !c.requestId || !c.attemptId || !c.handoff.recipientId) continue;
    const agent = await deps.agents.findById(c.handoff.recipientId);
    const target = { agentId: c.handoff.recipientId, handle: agent?.handle ?? '', target: c.handoff.deliveryTarget, settings: agent?.providerSettings ?? {} };
    let seen;
    try {
      seen = await adapter.observeTurn(target, c.requestId, signal);
    } catch (err) {
      deps.logger.warn({ err, handoffId: c.handoff.id }, 'could not scan the session history; will try again');
      continue;
    }
    const h: Moveable = c.handoff;
    const move = async (event: DeliveryEvent, opts: TransitionOptions) => {
      try {
        const moved = await applyTransition(deps, h, event, { ...SYSTEM_ACTOR, id: deps.workerId }, opts);
        touched++;
        return moved;
      } catch (err) {
        if (hasErrorCode(err, 'stale_revision')) return null;
        throw err;
      }
    };
    if (seen.found) {
      if (seen.status === 'returned') {
        await move('observed_returned', {
          reason: 'found in the session history: finished',
          patch: { resultSummary: seen.result?.summary ?? null, result: seen.result?.output ?? null, deliveryDetail: null },
          updateAttempt: { id: c.attemptId, status: 'returned', finished: true, accepted: true, observed: true },
          ...(c.handoff.workState === 'open' || c.handoff.workState === 'claimed'
            ? { alsoWork: { current: c.handoff.workState, event: 'returned' as const, role: 'system' as const, reason: 'the turn found in the history returned a result' } }
            : {}),
        });
        continue;
      }
      if (seen.status === 'busy' || seen.status === 'rejected') {
        // Found, and it provably did nothing: settled exactly as the same answer to the write.
        const end = seen.status === 'busy' ? ({ status: 'busy', detail: seen.error ?? 'busy; nothing done' } as const) : ({ status: 'rejected', reason: seen.error ?? 'refused' } as const);
        try {
          await applyTransitions(deps, h, endMoves(h, end, c.attemptId, true, c.handoff.workState, 0, deps.windows), { ...SYSTEM_ACTOR, id: deps.workerId });
          touched++;
        } catch (err) {
          if (!hasErrorCode(err, 'stale_revision')) throw err;
        }
        continue;
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
          { ...routeOf({ recipientId: c.handoff.recipientId, provider: c.handoff.provider, pool: c.handoff.pool }), cause: 'due', handoffId: h.id },
          JOB_IDS.observed(h.id, moved.revision),
        );
      }
      continue;
    }
    if (!seen.complete) {
      await move('scan_missed', {
        reason: 'the history scan was incomplete; it does not count',
        detail: { complete: false },
        notBeforeInMs: INCOMPLETE_SCAN_RETRY_MS,
      });
      continue;
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
  }
  return touched;
}
