import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import { createClaudeCodeAdapter } from '../../libs/adapters/claude-code/create-claude-code-adapter.ts';
import { inheritedEnv } from '../../libs/adapters/command/create-command-adapter.ts';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import type { ProviderAdapter } from '../../libs/adapters/provider-adapter.ts';
import { agentCli } from '../support/agent-clis.ts';
import { anthropicProtocol } from '../support/fake-models/anthropic.ts';
import { startEgressTripwire, type EgressTripwire } from '../support/fake-models/egress-tripwire.ts';
import { startFakeModelServer, type FakeBehaviour, type FakeModelServer } from '../support/fake-models/fake-model-server.ts';
import { conformanceSuite, type ConformanceBehavior, type ConformanceHarness, type RecipientWrite } from './conformance-suite.ts';

/**
 * The REAL `claude` CLI (the pinned @anthropic-ai/claude-code) per turn, under Baton's engine,
 * against the fake Anthropic server on 127.0.0.1 behind a refusing egress proxy. How each
 * behaviour is made with the real program:
 * - ok / fail / slow: the fake answers the turn's model request at once / with HTTP 500 (the CLI
 *   retries 0 times) / only when the harness's `finish` releases it;
 * - busy: a claude process of Baton's is still alive in the agent's session (started by a second
 *   adapter on the same host, as a crashed worker leaves it) when the first write comes; it is
 *   released right after the adapter answered that write `busy`;
 * - refuse: the agent's working directory does not exist, so the turn cannot start (a refusal
 *   by configuration; nothing runs);
 * - lose_reply / hang_write: a write deadline (5 ms) far below starting claude.
 * The recipient's ledger is the fake's: every model request carrying a turn's marker line,
 * with the claude process's start and end from its run record.
 */

const FOREVER = 120_000;

interface AgentState {
  readonly handle: string;
  readonly cwd: string;
  readonly apiKey: string;
  /** Behaviours for the next turns that reach the model. */
  readonly model: ConformanceBehavior[];
  /** The first write must find a claude process of Baton's alive in the session. */
  busyFirst: boolean;
  release: () => void;
  hold: Promise<void>;
  /** Behaviour chosen per request id (a turn may make more than one model request). */
  readonly byRequest: Map<string, ConformanceBehavior>;
}

/** The turn a model request belongs to: the last marker of its prompt (a failed turn's prompt may precede it). */
const markerOf = (prompt: string) => [...prompt.matchAll(/^baton-request-id: (\S+)\s*$/gm)].at(-1)?.[1];

async function claudeCodeHarness(): Promise<ConformanceHarness> {
  const root = mkdtempSync(join(tmpdir(), 'baton-conformance-claude-'));
  const runDir = join(root, 'runs');
  const configDir = join(root, 'claude-config');
  const home = join(root, 'home');
  mkdirSync(home, { recursive: true });
  const binary = agentCli('claude');
  const fake: FakeModelServer = await startFakeModelServer([anthropicProtocol]);
  const tripwire: EgressTripwire = await startEgressTripwire();
  const agents = new Map<string, AgentState>();
  const byKey = new Map<string, AgentState>();
  const newHold = (a: { release: () => void; hold: Promise<void> }) => {
    a.hold = new Promise<void>((resolve) => (a.release = resolve));
  };

  fake.script((exchange): FakeBehaviour => {
    const agent = byKey.get(String(exchange.headers['x-api-key'] ?? ''));
    const requestId = markerOf(exchange.prompt);
    if (!agent || !requestId) return { kind: 'error', status: 400, message: 'not a turn of a conformance agent' };
    if (requestId.startsWith('blocker-'))
      return { kind: 'reply', text: 'the blocking turn ends', until: blockers.get(agent.handle)?.hold ?? Promise.resolve() };
    let behaviour = agent.byRequest.get(requestId);
    if (!behaviour) {
      behaviour = agent.model.shift() ?? 'ok';
      agent.byRequest.set(requestId, behaviour);
    }
    switch (behaviour) {
      case 'fail':
        return { kind: 'error', status: 500, message: 'the model broke' };
      case 'slow':
        return { kind: 'reply', text: `finished the slow turn ${requestId}`, until: agent.hold };
      case 'ok':
      case 'busy':
      case 'hang_write':
      case 'lose_reply':
      case 'refuse':
        return { kind: 'reply', text: `done: ${exchange.prompt.split('\n')[0] ?? ''}` };
    }
  });

  /** Blocking turns of the busy behaviour, by handle. */
  const blockers = new Map<string, { release: () => void; hold: Promise<void> }>();
  const settingsOf = (a: AgentState) => ({
    cwd: a.cwd,
    binary,
    configDir,
    apiKey: a.apiKey,
    env: {
      ANTHROPIC_BASE_URL: fake.url,
      CLAUDE_CODE_MAX_RETRIES: '0',
      HOME: home,
      DISABLE_TELEMETRY: '1',
      DISABLE_ERROR_REPORTING: '1',
      ...tripwire.env(),
    },
    timeoutMs: FOREVER,
  });

  /**
   * The adapter under test, unchanged; for an agent whose script starts with `busy` its first
   * write is preceded by a turn a second adapter (another worker) starts and leaves running.
   */
  const withBusySetup = (inner: ProviderAdapter): ProviderAdapter => ({
    ...inner,
    provider: inner.provider,
    async sendTurn(target, turn, signal) {
      const agent = agents.get(target.handle);
      if (!agent?.busyFirst) return inner.sendTurn(target, turn, signal);
      agent.busyFirst = false;
      const blocker = { release: () => undefined, hold: Promise.resolve() };
      newHold(blocker);
      blockers.set(agent.handle, blocker);
      const other = createClaudeCodeAdapter({ runDir, baseEnv: inheritedEnv(process.env) });
      const started = await other.sendTurn(
        target,
        { ...turn, requestId: `blocker-${agent.handle}`, message: 'a turn Baton started before a crash' },
        new AbortController().signal,
      );
      expect(started.outcome, JSON.stringify(started)).toBe('accepted');
      const sent = await inner.sendTurn(target, turn, signal);
      blocker.release();
      return sent;
    },
  });

  return {
    provider: 'claude_code',
    // Starting claude (a detached supervisor, then the CLI) takes far longer than 5 ms.
    lostWriteDeadlineMs: 5,
    adapters(deadlines) {
      const registry = createAdapters(['claude_code'], {
        demoHost: undefined,
        claudeCode: { runDir, baseEnv: inheritedEnv(process.env) },
        deadlines: { claude_code: deadlines },
      });
      return new AdapterRegistry([withBusySetup(registry.get('claude_code') as ProviderAdapter)]);
    },
    async agent(handle, script) {
      const refuses = script[0] === 'refuse';
      const cwd = join(root, 'agents', handle);
      // A refusing agent's working directory is never created.
      if (!refuses) mkdirSync(cwd, { recursive: true });
      const state: AgentState = {
        handle,
        cwd,
        apiKey: `fake-key-${handle}`,
        model: script.filter((b) => b !== 'busy' && b !== 'refuse').map((b) => (b === 'lose_reply' || b === 'hang_write' ? 'ok' : b)),
        busyFirst: script[0] === 'busy',
        release: () => undefined,
        hold: Promise.resolve(),
        byRequest: new Map(),
      };
      newHold(state);
      agents.set(handle, state);
      byKey.set(state.apiKey, state);
      return { settings: settingsOf(state) };
    },
    async writes(handle): Promise<RecipientWrite[]> {
      const agent = agents.get(handle);
      if (!agent) return [];
      const runs = runTimes(runDir);
      const out: RecipientWrite[] = [];
      for (const ex of fake.exchanges) {
        if (ex.headers['x-api-key'] !== agent.apiKey) continue;
        // These turns make one model request each (no tools, no stream fallback): a second
        // request whose prompt is the same turn would be the turn written twice.
        const requestId = markerOf(ex.prompt);
        if (!requestId || requestId.startsWith('blocker-')) continue;
        const group = runs.get(requestId)?.group;
        const live = [...runs.values()].find(
          (r) => r.requestId !== requestId && r.group === group && r.start <= ex.at && (r.end === null || r.end > ex.at),
        );
        out.push({ requestId, handoffId: '', at: ex.at, liveTurn: live?.requestId ?? null, answer: 'accepted' });
      }
      return out;
    },
    async finish(handle) {
      const agent = agents.get(handle);
      if (!agent) return;
      // For good: a finish that comes before claude's model request (the turn is RUNNING as
      // soon as claude starts) must still end the turn.
      agent.release();
    },
    async close() {
      for (const a of agents.values()) a.release();
      for (const b of blockers.values()) b.release();
      // Nothing may have tried to leave the machine.
      const attempts = [...tripwire.attempts];
      await fake.close();
      await tripwire.close();
      if (existsSync(root)) rmSync(root, { recursive: true, force: true });
      expect(attempts, 'connections the real claude tried to make past loopback').toEqual([]);
    },
  };
}

/** Every run record's process start and end, by request id (the harness's view of the host). */
function runTimes(runDir: string): Map<string, { requestId: string; group: string; start: number; end: number | null }> {
  const out = new Map<string, { requestId: string; group: string; start: number; end: number | null }>();
  if (!existsSync(runDir)) return out;
  for (const group of readdirSync(runDir)) {
    for (const requestId of readdirSync(join(runDir, group)).filter((n) => !n.startsWith('.'))) {
      const dir = join(runDir, group, requestId);
      const started = existsSync(join(dir, 'started.json'))
        ? (JSON.parse(readFileSync(join(dir, 'started.json'), 'utf8')) as { startedAt: number })
        : null;
      if (!started) continue;
      const exit = existsSync(join(dir, 'exit.json'))
        ? (JSON.parse(readFileSync(join(dir, 'exit.json'), 'utf8')) as { endedAt: number })
        : null;
      out.set(requestId, { requestId, group, start: started.startedAt, end: exit?.endedAt ?? null });
    }
  }
  return out;
}

// Starting the real CLI takes about a second per turn on a shared CI machine.
conformanceSuite('claude_code (the real claude CLI, fake model on loopback)', claudeCodeHarness, {
  writeDeadlineMs: 10_000,
  timeoutMs: 60_000,
});
