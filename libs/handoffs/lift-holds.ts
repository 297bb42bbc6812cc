import { holdReason, type RuntimeSettings } from '../domain/runtime-settings.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { applyTransition } from './apply-transition.ts';
import { SYSTEM_ACTOR, type CoreDeps } from './ports.ts';
import { hasErrorCode } from '../domain/errors.ts';
import { routeOf } from '../queue/dispatch-job.ts';

const BATCH = 500;

/**
 * Re-evaluates every HELD handoff to an agent of this deployment against the current settings
 * and connections; those no longer held go back to WAITING (`hold_lifted`) and are queued on
 * this deployment's queues. Runs in the reconciler's sweep (so a pause that ends at
 * `enabledAfter` lifts by itself) and right after a setting or connection changes; the holds of
 * another deployment's agents are lifted by that deployment's reconciler.
 * @returns how many holds were lifted.
 */
export async function liftHolds(deps: CoreDeps & { settingsReader: { get(): Promise<RuntimeSettings> } }): Promise<number> {
  const held = await deps.handoffs.held(BATCH, deps.deployment);
  if (held.length === 0) return 0;
  const settings = await deps.settingsReader.get();
  let lifted = 0;
  for (const h of held) {
    if (holdReason(settings, h.connectionRule, deps.clock.now()) !== null) continue;
    try {
      const moved = await applyTransition(deps, h, 'hold_lifted', SYSTEM_ACTOR, { reason: 'the block is gone', patch: { deliveryDetail: null } });
      lifted++;
      if (h.recipientId && h.provider && h.provider !== 'manual') {
        await deps.scheduler
          .enqueue({ ...routeOf({ recipientId: h.recipientId, provider: h.provider, pool: h.pool }), cause: 'due', handoffId: h.id }, JOB_IDS.holdLifted(h.id, moved.revision))
          .catch((err: unknown) => deps.logger.warn({ err, handoffId: h.id }, 'could not queue a lifted handoff; the sweep will'));
      }
    } catch (err) {
      if (!hasErrorCode(err, 'stale_revision')) throw err;
    }
  }
  return lifted;
}
