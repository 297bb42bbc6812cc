import { describe, expect, it } from 'vitest';
import { eventAfterInterruption, eventAfterNotSent, eventAfterTurnError, refusalBudgetSpent } from '../../libs/domain/delivery-policy.ts';

const counters = (c: Partial<{ errorResends: number; interruptResends: number; refusals: number }> = {}) => ({
  errorResends: 0,
  interruptResends: 0,
  refusals: 0,
  ...c,
});

describe('delivery policy', () => {
  it('resends an errored turn at most twice', () => {
    expect(eventAfterTurnError(counters())).toBe('turn_failed_resend');
    expect(eventAfterTurnError(counters({ errorResends: 1 }))).toBe('turn_failed_resend');
    expect(eventAfterTurnError(counters({ errorResends: 2 }))).toBe('turn_failed');
  });

  it('resends an interrupted turn once, and only while the work is open', () => {
    expect(eventAfterInterruption(counters(), true)).toBe('turn_interrupted_resend');
    expect(eventAfterInterruption(counters({ interruptResends: 1 }), true)).toBe('turn_interrupted');
    expect(eventAfterInterruption(counters(), false)).toBe('turn_interrupted');
  });

  it('retries a refused write once', () => {
    expect(refusalBudgetSpent(counters({ refusals: 1 }))).toBe(false);
    expect(refusalBudgetSpent(counters({ refusals: 2 }))).toBe(true);
  });

  it('retries a write that never left while the error budget lasts', () => {
    expect(eventAfterNotSent(counters({ errorResends: 1 }))).toBe('send_failed');
    expect(eventAfterNotSent(counters({ errorResends: 2 }))).toBe('send_gave_up');
  });
});
