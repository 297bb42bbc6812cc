import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../libs/config/load-config.ts';
import { startStack, type RunningStack } from '../../services/cli/start-stack.ts';
import { TEST_REDIS_URL } from '../support/env.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

// The reconciliation windows reach the workers through the public configuration: environment
// -> loadConfig -> startStack (the same wiring `baton worker` uses) -> the delivery worker and
// its reconciler. With the defaults (an hour of scans, ten minutes before a resend) none of
// these tests could finish.
let baton: TestBaton;
let stack: RunningStack;

beforeAll(async () => {
  baton = await startTestBaton();
  const config = loadConfig({
    DATABASE_URL: baton.databaseUrl,
    REDIS_URL: TEST_REDIS_URL,
    BATON_REDIS_PREFIX: baton.prefix,
    BATON_QUEUE_SHARDS: '2',
    BATON_RECONCILE_INTERVAL_MS: '100',
    BATON_UNCERTAIN_SCANS: '2',
    BATON_UNCERTAIN_SCAN_WINDOW_MS: '400',
    BATON_INTERRUPTED_RESEND_AFTER_MS: '300',
    BATON_LOG_LEVEL: 'silent',
  });
  stack = await startStack({ config, logger: baton.logger, api: false, worker: true, demoHost: baton.host, workerId: 'configured-worker' });
  expect((await baton.post('/v1/agents', { id: 'origin', provider: 'demo' })).status).toBe(201);
}, 60_000);

afterAll(async () => {
  // Teardown is best effort.
  await stack?.stop().catch(() => undefined);
  await baton?.stop();
});

async function agent(id: string, script: Parameters<TestBaton['host']['script']>[1]): Promise<void> {
  expect((await baton.post('/v1/agents', { id, provider: 'demo' })).status).toBe(201);
  baton.host.script(id, script);
}

describe('reconciliation windows set through the configuration', () => {
  it('BATON_UNCERTAIN_SCANS / BATON_UNCERTAIN_SCAN_WINDOW_MS: a write that never landed is proven absent by two scans over the configured window, then CANCELLED', async () => {
    await agent('dropper', ['drop']);
    const sent = await baton.post('/v1/handoffs', { from: 'origin', to: 'dropper', message: 'never lands', title: 'dropped write' });
    const h = await waitForState(baton, sent.body.id, 'CANCELLED', 15_000);
    // (Work events, such as the work's own cancellation, are left out: delivery moves only.)
    expect(h.events.filter((e: any) => e.workTo === null).map((e: any) => e.event)).toEqual([
      'enrolled',
      'attempt_reserved',
      'reply_lost',
      'scan_missed',
      'proven_absent',
    ]);
    const scans = h.events.filter((e: any) => e.event === 'scan_missed' || e.event === 'proven_absent');
    expect(Date.parse(scans[1].at) - Date.parse(scans[0].at)).toBeGreaterThanOrEqual(400);
    expect(scans[1].reason).toMatch(/^2 complete scans/);
    expect(baton.host.writesByHandoff().get(sent.body.id)).toBeUndefined();
  });

  it('BATON_INTERRUPTED_RESEND_AFTER_MS: an interrupted turn is resent after the configured wait, with a new request id', async () => {
    await agent('interrupted', ['interrupt']);
    const sent = await baton.post('/v1/handoffs', {
      from: 'origin',
      to: 'interrupted',
      message: 'interrupted once',
      title: 'interrupted once',
    });
    const h = await waitForState(baton, sent.body.id, 'RETURNED', 15_000);
    expect(h.attempts).toHaveLength(2);
    expect(h.attempts[0].requestId).not.toBe(h.attempts[1].requestId);
    const interrupted = h.events.find((e: any) => e.event === 'turn_interrupted_resend');
    const resent = h.events.filter((e: any) => e.event === 'attempt_reserved')[1];
    expect(Date.parse(resent.at) - Date.parse(interrupted.at)).toBeGreaterThanOrEqual(300);
  });
});
