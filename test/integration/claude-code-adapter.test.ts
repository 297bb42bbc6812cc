import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLAUDE_CODE_SPEC } from '../../libs/adapters/claude-code/claude-code-settings.ts';
import { claudeSessionId, createClaudeCodeAdapter } from '../../libs/adapters/claude-code/create-claude-code-adapter.ts';
import { transcriptPath } from '../../libs/adapters/claude-code/transcript.ts';
import { inheritedEnv } from '../../libs/adapters/command/create-command-adapter.ts';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import type { DeliveryTarget, TurnRequest } from '../../libs/adapters/provider-adapter.ts';
import { redactProviderSettings, validateProviderSettings } from '../../libs/adapters/provider-specs.ts';
import { agentCli } from '../support/agent-clis.ts';
import { eventually } from '../support/eventually.ts';
import { anthropicProtocol } from '../support/fake-models/anthropic.ts';
import { startEgressTripwire, type EgressTripwire } from '../support/fake-models/egress-tripwire.ts';
import {
  startFakeModelServer,
  type FakeBehaviour,
  type FakeExchange,
  type FakeModelServer,
} from '../support/fake-models/fake-model-server.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';
import { turnRequest } from '../support/turn-request.ts';

/**
 * The claude_code adapter against the REAL `claude` CLI (pinned; scripts/install-agent-clis.sh)
 * and the fake Anthropic server on 127.0.0.1, behind a refusing egress proxy: turns written
 * into a real session through Baton's engine, the session's own transcript read back, busy,
 * observation without a run record, and the settings rules.
 */

let root: string;
let fake: FakeModelServer;
let tripwire: EgressTripwire;
let baton: TestBaton;
let binary: string;
const configDir = () => join(root, 'claude-config');
const runDir = () => join(root, 'runs');

/** Per API key (one per agent): how the fake answers that agent's model requests. */
const scripts = new Map<string, (ex: FakeExchange) => FakeBehaviour>();
const MARKER = /^baton-request-id: (\S+)\s*$/m;
/**
 * The turn a model request belongs to: the last marker of its prompt. (After a failed turn the
 * CLI sends that turn's prompt and the next one as one user message: both markers appear.)
 */
const markerOf = (ex: FakeExchange) => [...ex.prompt.matchAll(/^baton-request-id: (\S+)\s*$/gm)].at(-1)?.[1] ?? null;

function hold(): { release: () => void; until: Promise<void> } {
  let release = () => undefined as void;
  const until = new Promise<void>((resolve) => (release = resolve));
  return { release, until };
}

function agentSettings(handle: string, extra: Record<string, unknown> = {}) {
  const cwd = join(root, 'work', handle);
  mkdirSync(cwd, { recursive: true });
  return {
    cwd,
    binary,
    configDir: configDir(),
    apiKey: `key-${handle}`,
    env: { ANTHROPIC_BASE_URL: fake.url, CLAUDE_CODE_MAX_RETRIES: '0', HOME: join(root, 'home'), ...tripwire.env() },
    timeoutMs: 120_000,
    ...extra,
  };
}

const requestsOf = (handle: string) => fake.exchanges.filter((ex) => ex.headers['x-api-key'] === `key-${handle}`);

/** The user prompts of a session's transcript, in order, as Claude Code recorded them. */
function transcriptPrompts(path: string): string[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { type?: string; message?: { content?: unknown } })
    .filter((l) => l.type === 'user' && typeof l.message?.content === 'string')
    .map((l) => l.message?.content as string);
}

/** A session made the way a user makes one: a plain `claude -p` turn in the working directory. */
async function existingSession(handle: string): Promise<{ sessionId: string; settings: ReturnType<typeof agentSettings> }> {
  const settings = agentSettings(handle);
  const sessionId = randomUUID();
  await promisify(execFile)(binary, ['-p', 'start the session by hand', '--session-id', sessionId, '--output-format', 'json'], {
    cwd: settings.cwd,
    env: {
      ...inheritedEnv(process.env),
      ...settings.env,
      CLAUDE_CONFIG_DIR: configDir(),
      ANTHROPIC_API_KEY: settings.apiKey,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    },
    timeout: 60_000,
  });
  return { sessionId, settings };
}

function adapters() {
  return createAdapters(['claude_code'], { claudeCode: { runDir: runDir(), baseEnv: inheritedEnv(process.env) } });
}

async function register(handle: string, settings: Record<string, unknown>, target?: string) {
  const res = await baton.post('/v1/agents', { id: handle, provider: 'claude_code', settings, ...(target ? { target } : {}) });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
}

async function send(to: string, title: string): Promise<string> {
  const res = await baton.post('/v1/handoffs', { from: 'lead', to, title, message: `please ${title}` });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
}

const written = (h: any): string[] => h.attempts.filter((a: any) => a.status !== 'not_sent').map((a: any) => a.requestId);

beforeAll(async () => {
  binary = agentCli('claude');
  root = mkdtempSync(join(tmpdir(), 'baton-claude-code-'));
  mkdirSync(join(root, 'home'), { recursive: true });
  fake = await startFakeModelServer([anthropicProtocol]);
  tripwire = await startEgressTripwire();
  fake.script(
    (ex) => scripts.get(String(ex.headers['x-api-key']))?.(ex) ?? { kind: 'reply', text: `done: ${ex.prompt.split('\n')[0] ?? ''}` },
  );
  baton = await startTestBaton();
  expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
});

afterAll(async () => {
  await baton?.stop();
  await fake?.close();
  await tripwire?.close();
  if (root && existsSync(root)) rmSync(root, { recursive: true, force: true });
});

describe('claude_code turns through Baton, with the real claude CLI', () => {
  it("lands a handoff as exactly one new turn of an existing session, visible in its transcript with the request id, and returns the model's final answer as the summary", async () => {
    const { sessionId, settings } = await existingSession('reviewer');
    const before = requestsOf('reviewer').length;
    scripts.set('key-reviewer', () => ({ kind: 'reply', text: 'Reviewed: two nits, otherwise fine.' }));
    await register('reviewer', settings, sessionId);
    const w = baton.startWorker({ adapters: adapters() });
    try {
      const id = await send('reviewer', 'review the patch');
      const h = await waitForState(baton, id, 'RETURNED', 30_000);
      expect(h.resultSummary ?? h.result?.summary).toBe('Reviewed: two nits, otherwise fine.');
      const [requestId] = written(h);
      expect(written(h)).toHaveLength(1);
      // One model request for the turn, in the existing session (resumed, not a new one: the
      // earlier turn is in its history).
      const turnRequests = requestsOf('reviewer').slice(before);
      expect(turnRequests.map(markerOf)).toEqual([requestId]);
      expect(turnRequests[0]!.headers['x-claude-code-session-id']).toBe(sessionId);
      expect(turnRequests[0]!.allText).toContain('start the session by hand');
      // The session's own history: the hand-made turn, then exactly one Baton turn with the marker.
      const prompts = transcriptPrompts(transcriptPath(configDir(), settings.cwd, sessionId));
      expect(prompts).toHaveLength(2);
      expect(prompts[0]).toBe('start the session by hand');
      expect(prompts[1]).toContain(`baton-request-id: ${requestId}`);
      expect(prompts[1]).toContain('please review the patch');
    } finally {
      await w.stop();
    }
  }, 60_000);

  it('holds a second handoff as BUSY while the first turn runs, and writes it after that turn ends, in order', async () => {
    const settings = agentSettings('builder');
    const first = hold();
    scripts.set('key-builder', (ex) =>
      ex.prompt.includes('please build one')
        ? { kind: 'reply', text: 'built one', until: first.until }
        : { kind: 'reply', text: 'built two' },
    );
    await register('builder', settings);
    const w = baton.startWorker({ adapters: adapters() });
    try {
      const one = await send('builder', 'build one');
      await waitForState(baton, one, 'RUNNING', 30_000);
      const two = await send('builder', 'build two');
      await waitForState(baton, two, 'BUSY', 10_000);
      // The first turn is at the model (held there); nothing of the second reached the session.
      await eventually(() => expect(requestsOf('builder')).toHaveLength(1), { what: 'the first turn at the model' });
      expect(requestsOf('builder').map(markerOf)).toEqual([(await baton.get(`/v1/handoffs/${one}`)).body.attempts.at(-1).requestId]);
      first.release();
      const h1 = await waitForState(baton, one, 'RETURNED', 30_000);
      const h2 = await waitForState(baton, two, 'RETURNED', 30_000);
      expect([h1.resultSummary ?? h1.result?.summary, h2.resultSummary ?? h2.result?.summary]).toEqual(['built one', 'built two']);
      expect(requestsOf('builder').map(markerOf)).toEqual([...written(h1), ...written(h2)]);
      // One session (created by the first turn, resumed by the second), turns in send order.
      const sessions = new Set(requestsOf('builder').map((ex) => ex.headers['x-claude-code-session-id']));
      expect(sessions.size).toBe(1);
      const path = transcriptPath(configDir(), settings.cwd, [...sessions][0] as string);
      const prompts = transcriptPrompts(path);
      expect(prompts.map((p) => MARKER.exec(p)?.[1])).toEqual([...written(h1), ...written(h2)]);
    } finally {
      await w.stop();
    }
  }, 90_000);

  it('ends a turn whose model call fails as FAILED, with the error in the timeline', async () => {
    const settings = agentSettings('broken');
    scripts.set('key-broken', () => ({ kind: 'error', status: 500, message: 'the model is overloaded' }));
    await register('broken', settings);
    const w = baton.startWorker({ adapters: adapters() });
    try {
      const id = await send('broken', 'try it');
      const h = await waitForState(baton, id, 'FAILED', 60_000);
      const timeline = JSON.stringify(h.events);
      expect(timeline).toContain('API Error: 500');
      expect(timeline).toContain('the model is overloaded');
      // Each attempt was one turn of its own (the failed-turn resends), never a write twice.
      const ids = requestsOf('broken').map(markerOf);
      expect(ids).toEqual(written(h));
      expect(new Set(ids).size).toBe(ids.length);
    } finally {
      await w.stop();
    }
  }, 90_000);
});

describe('the claude_code adapter itself', () => {
  const turn = (requestId: string, message: string): TurnRequest => turnRequest(message, { requestId, handoffId: randomUUID() });
  const never = new AbortController().signal;

  it("answers busy, writing nothing, while a claude process of Baton's is still alive in the session (as a crashed worker leaves it), and a new process follows that turn to its end", async () => {
    const settings = agentSettings('solo');
    const target: DeliveryTarget = { agentId: randomUUID(), handle: 'solo', target: 'solo', settings };
    const held = hold();
    scripts.set('key-solo', (ex) =>
      markerOf(ex) === 'req-solo-1' ? { kind: 'reply', text: 'the long turn ended', until: held.until } : { kind: 'reply', text: 'second' },
    );
    const crashed = createClaudeCodeAdapter({ runDir: runDir(), baseEnv: inheritedEnv(process.env) });
    expect((await crashed.sendTurn(target, turn('req-solo-1', 'a long turn'), never)).outcome).toBe('accepted');
    await eventually(() => expect(requestsOf('solo').map(markerOf)).toEqual(['req-solo-1']), { what: 'the first turn reached the model' });
    // The next worker: no memory of that process, only the host's run records.
    const next = createClaudeCodeAdapter({ runDir: runDir(), baseEnv: inheritedEnv(process.env) });
    expect(await next.isBusy(target, never)).toBe(true);
    expect(await next.sendTurn(target, turn('req-solo-2', 'too early'), never)).toMatchObject({ outcome: 'busy' });
    expect(await next.observeTurn(target, 'req-solo-1', never)).toEqual({ found: true, status: 'running' });
    held.release();
    const end = await next.waitForTurn(target, 'req-solo-1', { onRunning: async () => undefined }, never);
    expect(end).toMatchObject({ status: 'returned', result: { summary: 'the long turn ended' } });
    expect(await next.isBusy(target, never)).toBe(false);
    // The refused write never started claude.
    expect(requestsOf('solo').map(markerOf)).toEqual(['req-solo-1']);
  }, 60_000);

  it('observes from the session transcript where it has no run record: the answer after the marker, a prompt with no answer as interrupted, and no marker as complete absence', async () => {
    const settings = agentSettings('scribe');
    const target: DeliveryTarget = { agentId: randomUUID(), handle: 'scribe', target: 'scribe', settings };
    const cut = hold();
    scripts.set('key-scribe', (ex) =>
      markerOf(ex) === 'req-scribe-2'
        ? { kind: 'reply', text: 'never seen', until: cut.until }
        : { kind: 'reply', text: 'the scribe answered' },
    );
    const writer = createClaudeCodeAdapter({ runDir: runDir(), baseEnv: inheritedEnv(process.env) });
    expect((await writer.sendTurn(target, turn('req-scribe-1', 'write it down'), never)).outcome).toBe('accepted');
    await writer.waitForTurn(target, 'req-scribe-1', { onRunning: async () => undefined }, never);
    // A turn whose process dies before the answer: the prompt is in the transcript, no answer.
    expect((await writer.sendTurn(target, turn('req-scribe-2', 'and this'), never)).outcome).toBe('accepted');
    await eventually(() => expect(requestsOf('scribe').map(markerOf)).toContain('req-scribe-2'), {
      what: 'the second turn reached the model',
    });
    // Claude Code writes the prompt to the transcript on its own schedule (it may follow the model request).
    const path = transcriptPath(configDir(), settings.cwd, claudeSessionId(target));
    await eventually(() => expect(readFileSync(path, 'utf8')).toContain('baton-request-id: req-scribe-2'), {
      what: 'the second prompt in the transcript',
    });
    const record = join(runDir(), `session-${claudeSessionId(target)}`, 'req-scribe-2');
    const pid = (JSON.parse(readFileSync(join(record, 'started.json'), 'utf8')) as { programPid: number }).programPid;
    process.kill(-pid, 'SIGKILL');
    await eventually(() => expect(existsSync(join(record, 'exit.json'))).toBe(true), { what: 'the supervisor recorded the kill' });
    cut.release();
    // Another host's records (none for these turns): only the transcript can answer.
    const elsewhere = createClaudeCodeAdapter({ runDir: join(root, 'other-runs'), baseEnv: inheritedEnv(process.env) });
    expect(await elsewhere.observeTurn(target, 'req-scribe-1', never)).toMatchObject({
      found: true,
      status: 'returned',
      result: { summary: 'the scribe answered' },
    });
    expect(await elsewhere.observeTurn(target, 'req-scribe-2', never)).toMatchObject({ found: true, status: 'interrupted' });
    expect(await elsewhere.observeTurn(target, 'req-never-written', never)).toEqual({ found: false, complete: true });
    // With its record, the killed turn reads as failed by the signal.
    expect(await writer.observeTurn(target, 'req-scribe-2', never)).toMatchObject({
      found: true,
      status: 'failed',
      error: expect.stringContaining('SIGKILL'),
    });
  }, 60_000);

  it('refuses a session id it cannot find as gone, without starting claude', async () => {
    const settings = agentSettings('lost');
    const target: DeliveryTarget = { agentId: randomUUID(), handle: 'lost', target: randomUUID(), settings };
    const adapter = createClaudeCodeAdapter({ runDir: runDir(), baseEnv: inheritedEnv(process.env) });
    expect(await adapter.sendTurn(target, turn('req-lost-1', 'hello?'), never)).toMatchObject({ outcome: 'gone' });
    expect(requestsOf('lost')).toEqual([]);
  });

  it('made no connection past loopback in any of these runs', () => {
    expect(fake.exchanges.length).toBeGreaterThan(0);
    expect(tripwire.attempts).toEqual([]);
  });
});

describe('claude_code settings', () => {
  const base = { cwd: '/srv/agent' };

  it('refuses permission modes that wait for a human, and accepts the headless ones', () => {
    for (const mode of ['default', 'plan', 'auto']) {
      expect(() => validateProviderSettings('claude_code', { ...base, permissionMode: mode })).toThrow(/waits for a human/);
    }
    for (const mode of ['dontAsk', 'acceptEdits', 'bypassPermissions'])
      validateProviderSettings('claude_code', { ...base, permissionMode: mode });
    expect(() => validateProviderSettings('claude_code', { ...base, permissionMode: 'yolo' })).toThrow(/permissionMode/);
  });

  it('needs an absolute working directory and refuses unknown keys and variables Baton owns', () => {
    expect(() => validateProviderSettings('claude_code', {})).toThrow(/cwd/);
    expect(() => validateProviderSettings('claude_code', { cwd: 'relative/dir' })).toThrow(/absolute/);
    expect(() => validateProviderSettings('claude_code', { ...base, sandbox: 'x' })).toThrow();
    expect(() => validateProviderSettings('claude_code', { ...base, env: { CLAUDE_CONFIG_DIR: '/x' } })).toThrow(/configDir/);
    expect(() => validateProviderSettings('claude_code', { ...base, allowedTools: ['--dangerously-skip-permissions'] })).toThrow(
      /allowedTools/,
    );
  });

  it('never shows the API key or a token in the environment', () => {
    const shown = redactProviderSettings('claude_code', {
      ...base,
      apiKey: 'sk-ant-secret',
      env: { ANTHROPIC_AUTH_TOKEN: 'tok', OTHER: 'plain', MINE: { value: 'v', secret: true } },
    });
    expect(JSON.stringify(shown)).not.toMatch(/sk-ant-secret|tok"|"v"/);
    expect(shown).toMatchObject({
      apiKey: '[redacted]',
      env: { OTHER: 'plain', ANTHROPIC_AUTH_TOKEN: { value: '[redacted]', secret: true }, MINE: { value: '[redacted]', secret: true } },
    });
    expect(CLAUDE_CODE_SPEC.provider).toBe('claude_code');
  });
});
