import { countOf, reportsUsage, usageOf, type TurnUsage } from '../../domain/turn-usage.ts';
import type { TurnEnd } from '../provider-adapter.ts';

/**
 * A Codex turn's usage as the app-server reports it (verified with codex 0.171.0): after each
 * model request, `thread/tokenUsage/updated {threadId, turnId, tokenUsage: {total, last,
 * modelContextWindow}}`, where `last` is that request's `TokenUsageBreakdown` (`inputTokens`
 * counts the cached part too, `cachedInputTokens`, `cacheWriteInputTokens`, `outputTokens`,
 * `reasoningOutputTokens` within the output, `totalTokens`) and `total` the thread's running sum.
 * A turn's usage is the sum of its notifications' `last`. Codex reports no cost.
 */
export const TOKEN_USAGE_METHOD = 'thread/tokenUsage/updated';

/** The running sums of one followed turn; `seen` says any notification counted. */
export interface TokenTally {
  seen: boolean;
  input: number;
  cached: number;
  cacheWrite: number;
  output: number;
}

export const newTokenTally = (): TokenTally => ({ seen: false, input: 0, cached: 0, cacheWrite: 0, output: 0 });

/** Adds one notification's `last` to the tally (a malformed one adds nothing). */
export function addTokenUsage(tally: TokenTally, params: Record<string, unknown>): void {
  const last = (params['tokenUsage'] as { last?: Record<string, unknown> } | undefined)?.last;
  if (!last) return;
  const input = countOf(last['inputTokens']);
  const output = countOf(last['outputTokens']);
  if (input === undefined && output === undefined) return;
  tally.seen = true;
  tally.input += input ?? 0;
  tally.output += output ?? 0;
  tally.cached += countOf(last['cachedInputTokens']) ?? 0;
  tally.cacheWrite += countOf(last['cacheWriteInputTokens']) ?? 0;
}

/**
 * The turn's usage in Baton's terms: input without its cached part (as Anthropic counts it), the
 * cached part as cache reads, the model the thread ran with; undefined when nothing was reported.
 */
export function turnUsage(tally: TokenTally, model: string | undefined): TurnUsage | undefined {
  const usage = usageOf({
    model,
    ...(tally.seen
      ? {
          inputTokens: Math.max(0, tally.input - tally.cached),
          outputTokens: tally.output,
          cacheReadTokens: tally.cached,
          cacheWriteTokens: tally.cacheWrite,
        }
      : {}),
  });
  return reportsUsage(usage) ? usage : undefined;
}

/** The end with the turn's usage on it, for the ends that ran (returned, failed, interrupted). */
export function withUsage(end: TurnEnd | null, usage: TurnUsage | undefined): TurnEnd | null {
  if (!end || !usage) return end;
  if (end.status === 'returned' || end.status === 'failed' || end.status === 'interrupted') return { ...end, usage };
  return end;
}
