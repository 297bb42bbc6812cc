import { hasErrorCode } from '../domain/errors.ts';
import { applyWorkTransition, type WorkMoveDeps } from './apply-work-transition.ts';
import type { CoreDeps } from './ports.ts';
import { RECONCILER_DEFAULTS } from '../config/component-defaults.ts';

/** What expiring leases touches: the expired claims (`work`), each handoff, the move, the log. */
export type ExpireLeasesDeps = Pick<CoreDeps, 'work' | 'handoffs' | 'clock' | 'logger'> & WorkMoveDeps;

/**
 * Claims whose lease ran out without a heartbeat: the work goes back to the inbox (the next
 * claim is attempt + 1) and the old claim token is fenced out of heartbeat and return. A pull
 * claim also gives its delivery back (ACCEPTED -> WAITING). Runs in the reconciler's pass.
 * @returns how many claims expired.
 */
export async function expireLeases(deps: ExpireLeasesDeps): Promise<number> {
  const expired = await deps.work.expiredLeases(deps.clock.now(), RECONCILER_DEFAULTS.leaseExpiryBatch);
  let n = 0;
  for (const e of expired) {
    const h = await deps.handoffs.findById(e.id);
    if (!h || h.workState !== 'claimed' || h.claimToken !== e.claimToken) continue;
    try {
      await applyWorkTransition(
        deps,
        h,
        'lease_expired',
        { role: 'system', handle: null },
        {
          reason: 'the claim was not renewed in time',
          claimToken: e.claimToken,
          patch: { claimToken: null, claimedById: h.recipientId === null ? null : h.claimedById, leaseExpiresAt: null },
          ...(h.attemptCount === 0 && h.deliveryState === 'ACCEPTED' ? { delivery: 'claim_released' as const } : {}),
        },
      );
      n++;
    } catch (err) {
      if (!hasErrorCode(err, 'stale_revision') && !hasErrorCode(err, 'claim_lost')) throw err;
    }
  }
  if (n > 0) deps.logger.info({ count: n }, 'expired claims returned to the inbox');
  return n;
}
