import { describe, expect, it } from 'vitest';
import { budgetHoldReason, budgetWindow, checkBudgetLimits, isBudgetHold, reachedLimits } from '../../libs/domain/budgets.ts';

describe('budgets (pure)', () => {
  it('count in UTC days', () => {
    const w = budgetWindow(new Date('2026-12-08T23:59:59.999Z'));
    expect(w.start.toISOString()).toBe('2026-12-08T00:00:00.000Z');
    expect(w.end.toISOString()).toBe('2026-12-09T00:00:00.000Z');
    expect(budgetWindow(new Date('2026-12-09T00:00:00.000Z')).start.toISOString()).toBe('2026-12-09T00:00:00.000Z');
  });

  it('take tokens, dollars or both, each positive and in range', () => {
    expect(checkBudgetLimits({ tokensPerDay: 5 })).toEqual({ tokensPerDay: 5, usdPerDay: null });
    expect(checkBudgetLimits({ usdPerDay: 0.25, tokensPerDay: null })).toEqual({ tokensPerDay: null, usdPerDay: 0.25 });
    for (const bad of [
      {},
      { tokensPerDay: 0 },
      { tokensPerDay: 2.5 },
      { tokensPerDay: 1e13 },
      { usdPerDay: 0 },
      { usdPerDay: Infinity },
      { usdPerDay: '1' },
    ]) {
      expect(() => checkBudgetLimits(bad), JSON.stringify(bad)).toThrow(expect.objectContaining({ code: 'invalid_budget' }));
    }
  });

  it('are reached at their limit, and say so in words that start with budget:', () => {
    const limits = { tokensPerDay: 100, usdPerDay: 1 };
    expect(reachedLimits(limits, { tokens: 99, usd: 0.99 })).toEqual([]);
    expect(reachedLimits(limits, { tokens: 100, usd: 1 })).toEqual(['tokens', 'usd']);
    const now = new Date('2026-12-08T10:00:00Z');
    expect(budgetHoldReason({ kind: 'project', project: 'p' }, limits, { tokens: 5, usd: 0 }, now)).toBeNull();
    const reason = budgetHoldReason({ kind: 'agent', agent: 'dev' }, limits, { tokens: 120, usd: 1.5 }, now);
    expect(reason).toBe(
      'budget: agent dev spent 120 of 100 tokens and $1.50 of $1.00 today (UTC); held until 2026-12-09T00:00:00.000Z or a higher budget',
    );
    expect(isBudgetHold(reason)).toBe(true);
    expect(isBudgetHold('delivery is paused (enabled = false)')).toBe(false);
    expect(isBudgetHold(null)).toBe(false);
  });
});
