import { BatonError } from './errors.ts';

/**
 * Budgets (issue 34): a project, or one agent of it, may spend at most so many tokens and/or
 * so many US dollars a day on the turns Baton delivers to it. What a turn spent is what its
 * runtime reported (libs/domain/turn-usage.ts, stored per attempt); tokens count every kind
 * (input, output, cache reads and cache writes). The window is the UTC day. When a budget is
 * spent, new turns to the agents it covers are HELD with reason `budget` (no attempt spent)
 * until the next window or a higher budget; a turn already running is never cut, so a day may
 * end a little over its budget by what the turns running when it was reached spent. Pure.
 */

/** A budget's limits per UTC day; null: that measure is not limited. At least one is set. */
export interface BudgetLimits {
  readonly tokensPerDay: number | null;
  readonly usdPerDay: number | null;
}

/** What the turns a budget covers spent in its window. */
export interface BudgetSpent {
  readonly tokens: number;
  readonly usd: number;
}

/** Whose turns a budget counts: every agent of the project, or one agent (its handle). */
export type BudgetScope = { readonly kind: 'project'; readonly project: string } | { readonly kind: 'agent'; readonly agent: string };

/** The largest limits a budget takes. */
export const BUDGET_LIMITS = { maxTokensPerDay: 1_000_000_000_000, maxUsdPerDay: 1_000_000 } as const;

/** The window `now` falls in: the UTC day, from its midnight to the next. */
export function budgetWindow(now: Date): { readonly start: Date; readonly end: Date } {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  return { start, end: new Date(start.getTime() + 24 * 60 * 60_000) };
}

/**
 * A budget's limits from a request body (`tokensPerDay`, `usdPerDay`; null or absent: not
 * limited), checked.
 * @throws BatonError invalid_budget (neither given, or one out of range, or an unknown field)
 */
export function checkBudgetLimits(input: { readonly tokensPerDay?: unknown; readonly usdPerDay?: unknown }): BudgetLimits {
  const tokens = input.tokensPerDay ?? null;
  const usd = input.usdPerDay ?? null;
  if (
    tokens !== null &&
    (typeof tokens !== 'number' || !Number.isInteger(tokens) || tokens < 1 || tokens > BUDGET_LIMITS.maxTokensPerDay)
  ) {
    throw new BatonError('invalid_budget', `tokensPerDay must be a whole number from 1 to ${BUDGET_LIMITS.maxTokensPerDay}`);
  }
  if (usd !== null && (typeof usd !== 'number' || !Number.isFinite(usd) || usd <= 0 || usd > BUDGET_LIMITS.maxUsdPerDay)) {
    throw new BatonError('invalid_budget', `usdPerDay must be a number above 0 and at most ${BUDGET_LIMITS.maxUsdPerDay}`);
  }
  if (tokens === null && usd === null) throw new BatonError('invalid_budget', 'a budget limits tokensPerDay, usdPerDay, or both');
  return { tokensPerDay: tokens, usdPerDay: usd };
}

/** Which limits `spent` has reached (a limit is reached at or above it), in the order tokens, USD. */
export function reachedLimits(limits: BudgetLimits, spent: BudgetSpent): Array<'tokens' | 'usd'> {
  const reached: Array<'tokens' | 'usd'> = [];
  if (limits.tokensPerDay !== null && spent.tokens >= limits.tokensPerDay) reached.push('tokens');
  if (limits.usdPerDay !== null && spent.usd >= limits.usdPerDay) reached.push('usd');
  return reached;
}

/** Dollars as budgets show them: cents, or four places below a cent. */
export const formatUsd = (n: number): string => `$${n.toFixed(n > 0 && n < 0.01 ? 4 : 2)}`;

/**
 * Why a turn to an agent this budget covers is HELD, or null while the budget is not spent:
 * `budget: <scope> spent <what> of <limit> today (UTC); held until <next window> or a higher budget`.
 * The words start with `budget:`, the hold's reason the sender sees in the delivery detail.
 */
export function budgetHoldReason(scope: BudgetScope, limits: BudgetLimits, spent: BudgetSpent, now: Date): string | null {
  const reached = reachedLimits(limits, spent);
  if (reached.length === 0) return null;
  const what = reached
    .map((r) =>
      r === 'tokens' ? `${spent.tokens} of ${limits.tokensPerDay} tokens` : `${formatUsd(spent.usd)} of ${formatUsd(limits.usdPerDay!)}`,
    )
    .join(' and ');
  const who = scope.kind === 'project' ? `project ${scope.project}` : `agent ${scope.agent}`;
  return `budget: ${who} spent ${what} today (UTC); held until ${budgetWindow(now).end.toISOString()} or a higher budget`;
}

/** Whether a HELD handoff's delivery detail is a budget's hold (budgetHoldReason's words). */
export function isBudgetHold(detail: string | null | undefined): boolean {
  return detail?.startsWith('budget: ') ?? false;
}
