import { describe, expect, it } from 'vitest';
import { addTokenUsage, newTokenTally, turnUsage, withUsage } from '../../libs/adapters/codex/codex-usage.ts';
import { readStreamEnd, streamUsage } from '../../libs/adapters/claude-code/stream-end.ts';
import { reportsUsage, sumUsage, usageOf } from '../../libs/domain/turn-usage.ts';

describe('turn usage', () => {
  it('keeps only the usable parts of what a runtime sent', () => {
    expect(usageOf({ model: 'm', inputTokens: 5, outputTokens: -1, cacheReadTokens: 1.5, costUsd: Number.NaN })).toEqual({
      model: 'm',
      inputTokens: 5,
    });
    expect(reportsUsage(usageOf({}))).toBe(false);
  });

  it('sums attempts: turns and time only for turns that ran, a cost only where one was reported', () => {
    const t = sumUsage([
      { turnMs: 1000, inputTokens: 3, costUsd: 0.1 },
      { turnMs: null, outputTokens: 2 },
      { turnMs: 500, costUsd: 0.2 },
    ]);
    expect(t).toEqual({ turns: 2, turnMs: 1500, inputTokens: 3, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.3 });
    expect(sumUsage([{ turnMs: 1 }]).costUsd).toBeNull();
  });

  it("Codex: sums each request's `last`, and counts input without its cached part", () => {
    const tally = newTokenTally();
    const last = (inputTokens: number, cachedInputTokens: number, outputTokens: number) => ({
      tokenUsage: { last: { inputTokens, cachedInputTokens, cacheWriteInputTokens: 0, outputTokens }, total: {} },
    });
    addTokenUsage(tally, last(100, 40, 7));
    addTokenUsage(tally, last(50, 10, 3));
    addTokenUsage(tally, { tokenUsage: {} });
    expect(turnUsage(tally, 'gpt-x')).toEqual({
      model: 'gpt-x',
      inputTokens: 100,
      cacheReadTokens: 50,
      cacheWriteTokens: 0,
      outputTokens: 10,
    });
    expect(turnUsage(newTokenTally(), undefined)).toBeUndefined();
    expect(withUsage({ status: 'busy', detail: 'x' }, { inputTokens: 1 })).toEqual({ status: 'busy', detail: 'x' });
  });

  it("Claude Code: the result's usage and cost, the real assistant message's model", () => {
    const stream = [
      JSON.stringify({ type: 'system', subtype: 'init', model: 'init-model' }),
      JSON.stringify({ type: 'assistant', message: { model: 'claude-real' } }),
      JSON.stringify({
        type: 'result',
        is_error: false,
        total_cost_usd: 0.0123,
        usage: { input_tokens: 9, output_tokens: 4, cache_read_input_tokens: 2, cache_creation_input_tokens: 1 },
      }),
    ].join('\n');
    const end = readStreamEnd(stream);
    expect(end && streamUsage(end)).toEqual({
      model: 'claude-real',
      inputTokens: 9,
      outputTokens: 4,
      cacheReadTokens: 2,
      cacheWriteTokens: 1,
      costUsd: 0.0123,
    });
  });
});
