import { holdReason, type RuntimeSettings } from '../domain/runtime-settings.ts';
import type { ConnectionRule } from '../db/held-handoffs.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { applyTransition } from './apply-transition.ts';
import { SYSTEM_ACTOR, type CoreDeps, type TransitionDeps } from './ports.ts';
import { hasErrorCode } from '../domain/errors.ts';
import { routeOf } from '../queue/dispatch-job.ts';
import { RECONCILER_DEFAULTS } from '../config/component-defaults.ts';
import { isBudgetHold } from '../domain/budgets.ts';
import { BudgetGate } from './budget-gate.ts';

/** HELD handoffs read per statement: one keyset page. */
export const HOLDS_PAGE_SIZE = RECONCILER_DEFAULTS.holdsPageSize;

const RULES: readonly ConnectionRule[] = ['allow', 'block'];

export interface LiftHoldsOptions {
  /** Rows per statement (default HOLDS_PAGE_SIZE). */
  readonly pageSize?: number;
  /** Stop after this many pages (default: every page); the reconciler's next pass takes the rest. */
  readonly maxPages?: number;
}

/**
 * What lifting holds touches: the settings, the HELD pages of this deployment's agents, the
 * move, the wake-up on this deployment's queues, the log.
 */
export type LiftHoldsDeps = TransitionDeps &
  Pick<CoreDeps, 'heldHandoffs' | 'budgets' | 'deployment' | 'scheduler' | 'logger'> & {
    readonly settingsReader: { get(): Promise<RuntimeSettings> };
  };

/**
 * Re-evaluates every HELD handoff to an agent of this deployment against the current settings
 * and connections; those no longer held go back to WAITING (`hold_lifted`) and are queued on
 * this deployment's queues. Runs in the reconciler (so a pause that ends at `enabledAfter`
 * lifts by itself) and right after a setting or connection changes; the holds of another
 * deployment's agents are lifted by that deployment's reconciler.
 *
 * `holdReason` reads only the settings, the pair's connection rule and the clock, so which
 * rules (allow, block, none) it lets through is known before any row is read, and only holds
 * with those rules are read: holds that are still blocked cost nothing, however many there are.
 * Those are read in keyset pages on `seq` (HeldHandoffs.page, `pageSize` rows per statement),
 * each starting after the last one read, until a short page; every row is still checked with
 * `holdReason` before it moves. A budget's hold (its detail starts `budget:`) stays while a
 * budget covering the recipient is still spent in today's window (one look per recipient per
 * call); any other hold that ended is lifted even when a budget is now spent, and the worker
 * then holds it again with the budget's reason, so the timeline says why it waits.
 * @returns how many holds were lifted.
 */
export async function liftHolds(deps: LiftHoldsDeps, opts: LiftHoldsOptions = {}): Promise<number> {
  const pageSize = opts.pageSize ?? HOLDS_PAGE_SIZE;
  const maxPages = opts.maxPages ?? Infinity;
  const settings = await deps.settingsReader.get();
  const now = deps.clock.now();
  const rules = RULES.filter((rule) => holdReason(settings, rule, now) === null);
  const noRule = holdReason(settings, null, now) === null;
  if (rules.length === 0 && !noRule) return 0;
  let lifted = 0;
  const budgets = new BudgetGate(deps, Infinity);
  let after: bigint | string = '0';
  for (let page = 0; page < maxPages; page++) {
    const held = await deps.heldHandoffs.page({ after, limit: pageSize, deployment: deps.deployment, rules, noRule });
    for (const h of held) {
      if (holdReason(settings, h.connectionRule, deps.clock.now()) !== null) continue;
      if (isBudgetHold(h.deliveryDetail) && h.recipientId && (await budgets.holdFor(h.recipientId)) !== null) continue;
      try {
        const moved = await applyTransition(deps, h, 'hold_lifted', SYSTEM_ACTOR, {
          reason: 'the block is gone',
          patch: { deliveryDetail: null },
        });
        lifted++;
        if (h.recipientId && h.provider && h.provider !== 'manual') {
          await deps.scheduler
            .enqueue(
              { ...routeOf({ recipientId: h.recipientId, provider: h.provider, pool: h.pool }), cause: 'due', handoffId: h.id },
              JOB_IDS.holdLifted(h.id, moved.revision),
            )
            .catch((err: unknown) => deps.logger.warn({ err, handoffId: h.id }, 'could not queue a lifted handoff; the sweep will'));
        }
      } catch (err) {
        if (!hasErrorCode(err, 'stale_revision')) throw err;
      }
    }
    const last = held[held.length - 1];
    if (held.length < pageSize || !last) break;
    after = last.seq;
  }
  if (lifted > 0) deps.logger.info({ count: lifted }, 'holds lifted');
  return lifted;
}
