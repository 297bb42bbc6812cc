import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inheritedEnv } from '../../libs/adapters/command/create-command-adapter.ts';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { DEFAULT_DELIVERY_WINDOWS } from '../../libs/domain/delivery-policy.ts';
import { startClaudeCodeFixture, type ClaudeCodeFixture } from '../support/claude-code-fixture.ts';
import { startCodexFixture, type CodexFixture } from '../support/codex-fixture.ts';
import type { FakeBehaviour, FakeExchange, FakeModelServer } from '../support/fake-models/fake-model-server.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * What the model reads after its errors, through Baton's engine and the REAL CLIs (pinned,
 * against the fake model on loopback, their own retries off): a failed turn's prompt stays in a
 * Claude Code session or a Codex thread, so the resend's text says which unanswered request it
 * replaces, and the first turn after a handoff that ended FAILED says which Baton requests were
 * given up and must not be acted on. Checked in the model requests themselves.
 *
 * The script, per agent, by model request: #1 (handoff A) a 500, transient: resent after the
 * back-off; #2 (A's resend) answered; #3 (handoff B) a 401, authentication: FAILED at once; #4
 * (handoff C) answered, and it must name B's request as given up.
 */
const WINDOWS = { ...DEFAULT_DELIVERY_WINDOWS, errorResendDelayMs: 300 };

function scripted(): { choose: (ex: FakeExchange) => FakeBehaviour; requests: FakeExchange[] } {
  const requests: FakeExchange[] = [];
  return {
    requests,
    choose(ex) {
      requests.push(ex);
      switch (requests.length) {
        case 1:
          return { kind: 'error', status: 500, message: 'the model is having a moment' };
        case 3:
          return { kind: 'error', status: 401, message: 'invalid api key' };
        default:
          return { kind: 'reply', text: `answered request ${requests.length}` };
      }
    },
  };
}

/** Runs the three handoffs through Baton and checks the model's requests. */
async function walk(baton: TestBaton, to: string, requests: FakeExchange[]): Promise<void> {
  const send = async (title: string) => {
    const res = await baton.post('/v1/handoffs', { from: 'lead', to, title, message: `please do ${title}` });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };
  const a = await waitForState(baton, await send('task A'), 'RETURNED', 60_000);
  const [r1, r2] = a.attempts.map((x: { requestId: string }) => x.requestId);
  expect(a.attempts.map((x: { status: string }) => x.status)).toEqual(['failed', 'returned']);
  // The resend's own text (the newest user message the model got) says what it replaces.
  const resend = requests[1]!;
  expect(resend.prompt).toContain(`baton-request-id: ${r2}`);
  expect(resend.prompt).toContain(`This request replaces the earlier unanswered request baton-request-id ${r1} of the same handoff`);
  // The unanswered first copy is still in the conversation the model reads.
  expect(resend.allText).toContain(`baton-request-id: ${r1}`);

  const b = await waitForState(baton, await send('task B'), 'FAILED', 60_000);
  expect(b.attempts).toHaveLength(1);
  const rB = b.attempts[0].requestId as string;
  expect(b.detail).toMatch(/^not resent: the runtime's credentials were refused \(authentication\)/);

  await waitForState(baton, await send('task C'), 'RETURNED', 60_000);
  const next = requests[3]!;
  expect(next.prompt).toContain('Baton gave up on these earlier requests in this session');
  expect(next.prompt).toContain(`- baton-request-id ${rB} (handoff ${b.id}, "task B"): FAILED: not resent`);
  expect(next.prompt).toContain('must not be acted on');
  // Said before the new request's own text.
  expect(next.prompt.indexOf('must not be acted on')).toBeLessThan(next.prompt.indexOf('please do task C'));
}

function noEgress(fake: FakeModelServer, attempts: readonly string[]): void {
  expect(attempts).toEqual([]);
  expect(fake.refusedConnections).toBe(0);
}

/** One real CLI wired to the fake model: the agent's settings, the worker's adapters, the fake's script. */
interface RealCli {
  readonly provider: 'claude_code' | 'codex';
  settings(): Record<string, unknown>;
  adapters(): ReturnType<typeof createAdapters>;
  script(choose: (ex: FakeExchange) => FakeBehaviour): void;
  noEgress(): void;
  close(): Promise<void>;
}

const CLIS: ReadonlyArray<{ name: string; start: () => Promise<RealCli> }> = [
  {
    name: 'Claude Code (the session)',
    start: async () => {
      const fx: ClaudeCodeFixture = await startClaudeCodeFixture('baton-claude-notices-');
      return {
        provider: 'claude_code',
        settings: () => fx.settings('agent'),
        adapters: () => createAdapters(['claude_code'], { claudeCode: { runDir: fx.runDir, baseEnv: inheritedEnv(process.env) } }),
        script: (choose) => fx.script('agent', choose),
        noEgress: () => noEgress(fx.fake, fx.tripwire.attempts),
        close: () => fx.close(),
      };
    },
  },
  {
    name: 'Codex (the thread)',
    start: async () => {
      const fx: CodexFixture = await startCodexFixture();
      return {
        provider: 'codex',
        settings: () => ({ cwd: fx.cwd, codexHome: fx.codexHome, binary: fx.binary }),
        adapters: () => createAdapters(['codex'], { codex: { baseEnv: fx.env, pollMs: 100 } }),
        script: (choose) => fx.fake.script(choose),
        noEgress: () => noEgress(fx.fake, fx.tripwire.attempts),
        close: () => fx.close(),
      };
    },
  },
];

describe.each(CLIS)('$name: what it is told about earlier requests', ({ start }) => {
  let cli: RealCli;
  let baton: TestBaton;

  beforeAll(async () => {
    cli = await start();
    baton = await startTestBaton();
    expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
  });

  afterAll(async () => {
    await baton?.stop();
    await cli?.close();
  });

  it('the resend names the request it replaces; the turn after a given-up handoff names it as not to be acted on', async () => {
    const s = scripted();
    cli.script(s.choose);
    expect((await baton.post('/v1/agents', { id: 'agent', provider: cli.provider, settings: cli.settings() })).status).toBe(201);
    const worker = baton.startWorker({ adapters: cli.adapters(), windows: WINDOWS });
    try {
      await walk(baton, 'agent', s.requests);
      expect(s.requests).toHaveLength(4);
      cli.noEgress();
    } finally {
      await worker.stop();
    }
  }, 180_000);
});
