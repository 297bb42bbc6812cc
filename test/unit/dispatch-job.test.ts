import { describe, expect, it } from 'vitest';
import { parseDispatchJob } from '../../libs/queue/dispatch-job.ts';

const agentId = '0190a1b2-0000-7000-8000-000000000001';

describe('dispatch job payload', () => {
  it('accepts the declared shape', () => {
    expect(parseDispatchJob({ agentId, provider: 'demo', cause: 'sent', handoffId: agentId })).toEqual({ agentId, provider: 'demo', cause: 'sent', handoffId: agentId });
  });

  it('rejects anything else with the offending path', () => {
    expect(() => parseDispatchJob({ agentId: 'nope', provider: 'demo', cause: 'sent' })).toThrow(/agentId/);
    expect(() => parseDispatchJob({ agentId, provider: 'demo', cause: 'whenever' })).toThrow(/cause/);
    expect(() => parseDispatchJob({ agentId, provider: 'demo', cause: 'sent', extra: 1 })).toThrow(/extra/);
    expect(() => parseDispatchJob(null)).toThrow();
  });
});
