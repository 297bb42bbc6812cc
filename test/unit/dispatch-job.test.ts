import { describe, expect, it } from 'vitest';
import { parseDispatchJob, parseWakeJob, queueRoute } from '../../libs/queue/dispatch-job.ts';

const agentId = '0190a1b2-0000-7000-8000-000000000001';

describe('dispatch job payload', () => {
  it('accepts the declared shape', () => {
    expect(parseDispatchJob({ agentId, provider: 'demo', cause: 'sent', handoffId: agentId })).toEqual({
      agentId,
      provider: 'demo',
      cause: 'sent',
      handoffId: agentId,
    });
  });

  it('rejects anything else with the offending path', () => {
    expect(() => parseDispatchJob({ agentId: 'nope', provider: 'demo', cause: 'sent' })).toThrow(/agentId/);
    expect(() => parseDispatchJob({ agentId, provider: 'demo', cause: 'whenever' })).toThrow(/cause/);
    expect(() => parseDispatchJob({ agentId, provider: 'demo', cause: 'sent', extra: 1 })).toThrow(/extra/);
    expect(() => parseDispatchJob(null)).toThrow();
  });

  it('names a queue by provider, and by pool only when one is named; a wake job carries nothing else', () => {
    expect(queueRoute('demo', '')).toEqual({ provider: 'demo' });
    expect(queueRoute('demo', undefined)).toEqual({ provider: 'demo' });
    expect(queueRoute('demo', 'gpu')).toEqual({ provider: 'demo', pool: 'gpu' });
    expect(parseWakeJob(queueRoute('demo', 'gpu'))).toEqual({ provider: 'demo', pool: 'gpu' });
    expect(() => parseWakeJob({ provider: 'demo', agentId })).toThrow(/agentId/);
  });
});
