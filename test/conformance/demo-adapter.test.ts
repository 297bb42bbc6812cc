import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { DemoAgentHost, type DemoBehavior } from '../../libs/adapters/demo/demo-agent-host.ts';
import { conformanceSuite, type ConformanceBehavior, type ConformanceHarness, type RecipientWrite } from './conformance-suite.ts';

const AS_DEMO: Record<ConformanceBehavior, DemoBehavior> = {
  ok: 'ok',
  busy: 'busy',
  refuse: 'refuse',
  fail: 'fail',
  lose_reply: 'lose_reply',
  // The write itself lands; its answer is held back by the agent's replyDelayMs (set below).
  hang_write: 'ok',
  slow: 'hang',
};

/** The simulated sessions, in this process. */
async function demoHarness(): Promise<ConformanceHarness> {
  const host = new DemoAgentHost();
  return {
    provider: 'demo',
    adapters: (deadlines) => createAdapters(['demo'], { demoHost: host, deadlines: { demo: deadlines } }),
    async agent(handle, script) {
      host.script(
        handle,
        script.map((b) => AS_DEMO[b]),
      );
      return { settings: script.includes('hang_write') ? { thinkMs: 50, replyDelayMs: 5_000 } : { thinkMs: 50 } };
    },
    async writes(handle): Promise<RecipientWrite[]> {
      return host.writes(handle).map((w) => ({
        requestId: w.requestId,
        handoffId: w.handoffId,
        at: w.at,
        liveTurn: w.liveTurn,
        answer: w.answer === 'accepted' || w.answer === 'busy' || w.answer === 'refused' ? w.answer : 'other',
      }));
    },
    async finish(handle) {
      for (const turn of host.history(handle)) host.finish(handle, turn.requestId);
    },
    async close() {
      host.close();
    },
  };
}

conformanceSuite('demo (simulated sessions, in process)', demoHarness);
