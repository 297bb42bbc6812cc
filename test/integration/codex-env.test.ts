import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { daemonEnvFile } from '../../libs/adapters/codex/daemon-env.ts';
import { createCodexAdapter } from '../../libs/adapters/codex/create-codex-adapter.ts';
import type { DeliveryTarget, ProviderAdapter, TurnEnd, TurnRequest } from '../../libs/adapters/provider-adapter.ts';
import { providerSpec, validateProviderSettings } from '../../libs/adapters/provider-specs.ts';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { startCodexFixture, type CodexFixture } from '../support/codex-fixture.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';
import { turnRequest } from '../support/turn-request.ts';

/**
 * The codex provider's `env` setting against the REAL codex 0.171.0: a Codex home whose model
 * provider reads its key from the environment (`env_key = "FAKE_OPENAI_KEY"`), the fake Responses
 * server on loopback checking what arrives. The variables reach the turns through the home's one
 * app-server daemon, so agents of one home with different `env` take turns with it: an idle
 * daemon is restarted with the writing agent's `env`, a busy one never.
 */

let fx: CodexFixture;
let adapter: ProviderAdapter;
const KEY = 'sk-test-baton-env-3f9a';
const signal = () => AbortSignal.timeout(20_000);

const turn = (message: string): TurnRequest => turnRequest(message);

/** An agent without a thread of its own yet (the first turn starts one), with or without the key in its `env`. */
function agent(id: string, env?: Record<string, unknown>): DeliveryTarget {
  return {
    agentId: id,
    handle: id,
    target: id,
    settings: { cwd: fx.cwd, codexHome: fx.codexHome, binary: fx.binary, ...(env ? { env } : {}) },
  };
}

/**
 * Writes a turn as Baton does: an answer of busy while the daemon still unloads the thread the
 * previous test's turn left (thread/resume: "is closing") wrote nothing, so it is sent again,
 * within the signal's time. Any other answer is returned as it is.
 */
async function sendWhenLoaded(a: ProviderAdapter, t: DeliveryTarget, req: TurnRequest) {
  const within = signal();
  for (;;) {
    const answer = await a.sendTurn(t, req, within);
    if (answer.outcome !== 'busy' || !/unloading the thread/.test(answer.detail ?? '')) return answer;
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function run(t: DeliveryTarget, req: TurnRequest): Promise<TurnEnd> {
  expect(await sendWhenLoaded(adapter, t, req)).toEqual({ outcome: 'accepted' });
  return adapter.waitForTurn(t, req.requestId, { onRunning: async () => undefined }, signal());
}

let withKey: DeliveryTarget;
let withoutKey: DeliveryTarget;

beforeAll(async () => {
  fx = await startCodexFixture({ envKey: 'FAKE_OPENAI_KEY' });
  adapter = createCodexAdapter({ baseEnv: fx.env, pollMs: 100 });
  withKey = agent('keyed', { FAKE_OPENAI_KEY: { value: KEY, secret: true } });
  withoutKey = agent('keyless');
});

afterAll(async () => {
  await adapter?.close();
  await fx?.close();
});

describe('the codex env setting, with the real codex app-server', () => {
  it("is checked and redacted like claude_code's: secrets shown as [redacted] on every read, names Baton sets refused", () => {
    const settings = {
      cwd: fx.cwd,
      env: { FAKE_OPENAI_KEY: { value: KEY, secret: true }, OPENAI_API_KEY: 'sk-plain', LOG_LEVEL: 'debug' },
    };
    expect(() => validateProviderSettings('codex', settings)).not.toThrow();
    const shown = providerSpec('codex').redact(settings);
    expect(shown['env']).toEqual({
      FAKE_OPENAI_KEY: { value: '[redacted]', secret: true },
      OPENAI_API_KEY: { value: '[redacted]', secret: true },
      LOG_LEVEL: 'debug',
    });
    expect(JSON.stringify(shown)).not.toContain(KEY);
    expect(JSON.stringify(shown)).not.toContain('sk-plain');
    expect(() => validateProviderSettings('codex', { cwd: fx.cwd, env: { CODEX_HOME: '/elsewhere' } })).toThrow(/CODEX_HOME.*codexHome/);
    expect(() => validateProviderSettings('codex', { cwd: fx.cwd, env: { BATON_REQUEST_ID: 'x' } })).toThrow(/BATON_REQUEST_ID/);
    expect(() => validateProviderSettings('codex', { cwd: fx.cwd, env: { 'BAD-NAME': 'x' } })).toThrow();
  });

  it('without the variable, a turn fails at once as a configuration failure naming it; no request reaches the model', async () => {
    const req = turn('needs a key it does not have');
    const end = await run(withoutKey, req);
    expect(end).toMatchObject({ status: 'failed', failure: { kind: 'configuration' } });
    expect(end.status === 'failed' && end.error).toContain('Missing environment variable: `FAKE_OPENAI_KEY`');
    expect(end.status === 'failed' && end.error).toContain("set FAKE_OPENAI_KEY in the agent's env setting");
    expect(fx.fake.exchanges.some((x) => x.allText.includes(req.requestId))).toBe(false);
  }, 30_000);

  it("with the variable in the agent's env, the idle daemon is restarted with it and the model sees the key", async () => {
    const before = fx.daemonPid();
    const req = turn('has its key');
    fx.fake.script(() => ({ kind: 'reply', text: 'keyed answer' }));
    expect(await run(withKey, req)).toMatchObject({ status: 'returned', result: { summary: 'keyed answer' } });
    const calls = fx.fake.exchanges.filter((x) => x.allText.includes(req.requestId));
    expect(calls).toHaveLength(1);
    expect(calls[0]!.headers['authorization']).toBe(`Bearer ${KEY}`);
    expect(fx.daemonPid(), "a new daemon, started with the agent's env").not.toBe(before);
    // What Baton records of the daemon's env: names and a fingerprint, never a value.
    const record = readFileSync(daemonEnvFile(fx.codexHome), 'utf8');
    expect(JSON.parse(record)).toMatchObject({ pid: fx.daemonPid(), names: ['FAKE_OPENAI_KEY'] });
    expect(record).not.toContain(KEY);
    // Another worker with the same env finds that daemon as it is: no restart.
    const other = createCodexAdapter({ baseEnv: fx.env, pollMs: 100 });
    try {
      const again = turn('same env, another worker');
      expect(await sendWhenLoaded(other, withKey, again)).toEqual({ outcome: 'accepted' });
      expect(await other.waitForTurn(withKey, again.requestId, { onRunning: async () => undefined }, signal())).toMatchObject({
        status: 'returned',
      });
    } finally {
      await other.close();
    }
    expect(fx.daemonPid()).toBe(JSON.parse(record).pid);
  }, 30_000);

  it('never cuts a running turn: an agent with another env waits as busy while the daemon is in a turn, and gets its daemon once it is idle', async () => {
    const keyed = turn('a long keyed turn');
    const held = fx.hold('the long answer');
    fx.fake.script((x) => (x.allText.includes(keyed.requestId) ? held.behaviour : { kind: 'reply', text: 'ok' }));
    expect(await sendWhenLoaded(adapter, withKey, keyed)).toEqual({ outcome: 'accepted' });
    const following = adapter.waitForTurn(withKey, keyed.requestId, { onRunning: async () => undefined }, signal());
    await eventually(async () => expect(fx.fake.exchanges.some((x) => x.allText.includes(keyed.requestId))).toBe(true), {
      what: 'the keyed turn reached the model',
    });
    const daemon = fx.daemonPid();
    const other = turn('an agent with another env');
    const answer = await adapter.sendTurn(withoutKey, other, signal());
    expect(answer).toMatchObject({ outcome: 'busy' });
    expect(answer.outcome === 'busy' && answer.detail).toMatch(/another env/);
    expect(fx.daemonPid(), 'the daemon running the turn was left alone').toBe(daemon);
    held.release();
    expect(await following).toMatchObject({ status: 'returned', result: { summary: 'the long answer' } });
    // Idle now: the other agent's write restarts the daemon without the key, and its turn fails for want of it.
    expect(await run(withoutKey, other)).toMatchObject({ status: 'failed', failure: { kind: 'configuration' } });
    expect(fx.daemonPid()).not.toBe(daemon);
  }, 40_000);

  it('through Baton: a handoff to an agent without the key ends FAILED after one attempt, saying what to set; with the key in env it is RETURNED', async () => {
    const baton = await startTestBaton();
    const worker = baton.startWorker({ adapters: createAdapters(['codex'], { codex: { baseEnv: fx.env, pollMs: 100 } }) });
    try {
      expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
      const settings = { cwd: fx.cwd, codexHome: fx.codexHome, binary: fx.binary };
      expect((await baton.post('/v1/agents', { id: 'nokey', provider: 'codex', settings })).status).toBe(201);
      const added = await baton.post('/v1/agents', {
        id: 'haskey',
        provider: 'codex',
        settings: { ...settings, env: { FAKE_OPENAI_KEY: { value: KEY, secret: true } } },
      });
      expect(added.status).toBe(201);
      expect(JSON.stringify(added.body), 'the API never shows the key').not.toContain(KEY);
      fx.fake.script(() => ({ kind: 'reply', text: 'the keyed agent answers' }));
      const failing = await baton.post('/v1/handoffs', { from: 'lead', to: 'nokey', title: 'keyless', message: 'needs the key' });
      const failed = await waitForState(baton, failing.body.id as string, 'FAILED', 20_000);
      expect(
        failed.attempts.map((a: { status: string }) => a.status),
        'not resent: a configuration failure',
      ).toEqual(['failed']);
      expect(JSON.stringify(failed)).toContain("set FAKE_OPENAI_KEY in the agent's env setting");
      const ok = await baton.post('/v1/handoffs', { from: 'lead', to: 'haskey', title: 'keyed', message: 'has the key' });
      const returned = await waitForState(baton, ok.body.id as string, 'RETURNED', 20_000);
      expect(returned.resultSummary ?? returned.result?.summary).toBe('the keyed agent answers');
    } finally {
      await worker.stop();
      await baton.stop();
    }
  }, 60_000);

  it('made no connection beyond loopback', () => {
    expect(fx.tripwire.attempts).toEqual([]);
    expect(fx.fake.refusedConnections).toBe(0);
  });
});
