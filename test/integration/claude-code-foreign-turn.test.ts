import { randomUUID } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claudeSessionId, createClaudeCodeAdapter } from '../../libs/adapters/claude-code/create-claude-code-adapter.ts';
import { findForeignTurn } from '../../libs/adapters/claude-code/foreign-turn.ts';
import { transcriptPath } from '../../libs/adapters/claude-code/transcript.ts';
import { inheritedEnv } from '../../libs/adapters/command/create-command-adapter.ts';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import type { DeliveryTarget, ProviderAdapter, TurnRequest } from '../../libs/adapters/provider-adapter.ts';
import { hold, markerOf, startClaudeCodeFixture, type ClaudeCodeFixture } from '../support/claude-code-fixture.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';
import { turnRequest } from '../support/turn-request.ts';

/**
 * A turn Baton did not start (a person's own claude on the same session) makes the session busy,
 * with the REAL `claude` CLI against the fake Anthropic server: Claude Code has no busy guard, so
 * without this a handoff arriving during the person's turn would run beside it.
 */

let fx: ClaudeCodeFixture;
let baton: TestBaton;
const never = new AbortController().signal;

const adapters = () =>
  createAdapters(['claude_code'], { demoHost: undefined, claudeCode: { runDir: fx.runDir, baseEnv: inheritedEnv(process.env) } });

/**
 * The worker's adapter, counting its busy answers: the engine writes (sendTurn) for a fresh
 * handoff and asks `isBusy` for one already BUSY, recording no new event while it stays busy.
 */
function countingBusy(): { registry: AdapterRegistry; busyAnswers: () => number } {
  const inner = adapters().get('claude_code') as ProviderAdapter;
  let busy = 0;
  const counted: ProviderAdapter = {
    ...inner,
    provider: inner.provider,
    async sendTurn(target, t, signal) {
      const sent = await inner.sendTurn(target, t, signal);
      if (sent.outcome === 'busy') busy++;
      return sent;
    },
    async isBusy(target, signal) {
      const answer = await inner.isBusy(target, signal);
      if (answer) busy++;
      return answer;
    },
  };
  return { registry: new AdapterRegistry([counted]), busyAnswers: () => busy };
}
const adapter = (opts: { now?: () => number } = {}) =>
  createClaudeCodeAdapter({ runDir: fx.runDir, baseEnv: inheritedEnv(process.env), ...opts });
const exited = (child: { on(e: 'exit', f: (code: number | null) => void): unknown }) =>
  new Promise<number | null>((resolve) => child.on('exit', resolve));

const turn = (requestId: string, message: string): TurnRequest => turnRequest(message, { requestId, handoffId: randomUUID() });

/** The sessions files claude keeps for its running processes, as written. */
function sessionFiles(): Array<{ pid: number; sessionId: string; procStart?: string; status?: string }> {
  const dir = join(fx.configDir, 'sessions');
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    try {
      return [JSON.parse(readFileSync(join(dir, name), 'utf8'))];
    } catch {
      return [];
    }
  });
}

beforeAll(async () => {
  fx = await startClaudeCodeFixture('baton-claude-foreign-');
  baton = await startTestBaton();
  expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
});

afterAll(async () => {
  await baton?.stop();
  await fx?.close();
});

describe("a person's own claude turn in the session", () => {
  it("answers a handoff BUSY while a person's `claude -p` is in a turn of the session, writing nothing, and delivers it as its own new turn after the person's turn ends", async () => {
    const handle = 'pair';
    const sessionId = randomUUID();
    await fx.personsTurn(handle, 'start the session by hand', { create: sessionId });
    const settings = fx.settings(handle);
    const path = transcriptPath(fx.configDir, settings.cwd, sessionId);
    const held = hold();
    fx.script(handle, (ex) =>
      markerOf(ex) === null && ex.prompt.includes('my own question')
        ? { kind: 'reply', text: "the person's answer", until: held.until }
        : { kind: 'reply', text: 'handled the handoff' },
    );
    expect((await baton.post('/v1/agents', { id: handle, provider: 'claude_code', settings, target: sessionId })).status).toBe(201);

    const person = fx.personsClaude(handle, 'my own question', { resume: sessionId });
    const personExit = exited(person);
    await eventually(() => expect(fx.requestsOf(handle).some((ex) => ex.prompt.includes('my own question'))).toBe(true), {
      what: "the person's turn at the model",
      timeoutMs: 30_000,
    });
    // What the pinned CLI keeps while it runs: its pid and session in <configDir>/sessions/<pid>.json.
    expect(sessionFiles()).toContainEqual(expect.objectContaining({ pid: person.pid, sessionId }));

    const counting = countingBusy();
    const w = baton.startWorker({ adapters: counting.registry });
    try {
      const sent = await baton.post('/v1/handoffs', { from: 'lead', to: handle, title: 'look at this', message: 'please look at this' });
      expect(sent.status).toBe(201);
      const id = sent.body.id as string;
      const busy = await waitForState(baton, id, 'BUSY', 20_000);
      expect(busy.events.find((e: any) => e.event === 'session_busy')?.reason).toContain(
        `claude process Baton did not start (pid ${person.pid}`,
      );
      // Asked again (every 100 ms in tests) while the person's turn waits on the model: still busy.
      await eventually(() => expect(counting.busyAnswers()).toBeGreaterThanOrEqual(5), { what: 'five busy answers', timeoutMs: 20_000 });
      expect((await baton.get(`/v1/handoffs/${id}`)).body.state).toBe('BUSY');
      // Nothing written: no Baton prompt reached the model or the session, no claude of Baton's started.
      expect(
        fx
          .requestsOf(handle)
          .map(markerOf)
          .filter((m) => m !== null),
      ).toEqual([]);
      expect(readFileSync(path, 'utf8')).not.toContain('baton-request-id');
      expect(existsSync(join(fx.runDir, `session-${sessionId}`))).toBe(false);

      const releasedAt = Date.now();
      held.release();
      expect(await personExit).toBe(0);
      const h = await waitForState(baton, id, 'RETURNED', 60_000);
      expect(h.resultSummary ?? h.result?.summary).toBe('handled the handoff');
      const requestIds = h.attempts.filter((a: any) => a.status !== 'not_sent' && a.status !== 'busy').map((a: any) => a.requestId);
      expect(requestIds).toHaveLength(1);
      // Its own new turn, after the person's: its model request came once the person's reply went
      // out, and the transcript holds the person's prompt and answer, then Baton's prompt.
      const batonRequests = fx.requestsOf(handle).filter((ex) => markerOf(ex) !== null);
      expect(batonRequests.map(markerOf)).toEqual(requestIds);
      expect(batonRequests[0]!.at).toBeGreaterThanOrEqual(releasedAt);
      expect(batonRequests[0]!.allText).toContain("the person's answer");
      expect(fx.transcriptPrompts(path)).toEqual([
        'start the session by hand',
        'my own question',
        expect.stringContaining(`baton-request-id: ${requestIds[0]}`),
      ]);
      const lines = fx.transcriptLines(path);
      const personsAnswer = lines.findIndex(
        (l) => l.type === 'assistant' && JSON.stringify(l.message?.content).includes("the person's answer"),
      );
      const batonsPrompt = lines.findIndex((l) => l.type === 'user' && JSON.stringify(l.message?.content).includes('baton-request-id'));
      expect(personsAnswer).toBeGreaterThan(0);
      expect(batonsPrompt).toBeGreaterThan(personsAnswer);
    } finally {
      await w.stop();
    }
  }, 120_000);

  it("does not take Baton's own claude for a person's: its process names a request of the session's run records, and its killed turn's unanswered prompt is judged by its record", async () => {
    const handle = 'own';
    const settings = fx.settings(handle);
    const target: DeliveryTarget = { agentId: randomUUID(), handle, target: handle, settings };
    const sessionId = claudeSessionId(target);
    const held = hold();
    fx.script(handle, (ex) =>
      markerOf(ex) === 'req-own-2' ? { kind: 'reply', text: 'never seen', until: held.until } : { kind: 'reply', text: 'first turn done' },
    );
    const a = adapter();
    expect((await a.sendTurn(target, turn('req-own-1', 'create the session'), never)).outcome).toBe('accepted');
    expect(await a.waitForTurn(target, 'req-own-1', { onRunning: async () => undefined }, never)).toMatchObject({ status: 'returned' });
    expect((await a.sendTurn(target, turn('req-own-2', 'a turn that will be killed'), never)).outcome).toBe('accepted');
    const path = transcriptPath(fx.configDir, settings.cwd, sessionId);
    await eventually(() => expect(fx.requestsOf(handle).map(markerOf)).toContain('req-own-2'), {
      what: "Baton's second turn at the model",
      timeoutMs: 30_000,
    });
    await eventually(() => expect(fx.transcriptPrompts(path).at(-1)).toContain('baton-request-id: req-own-2'), {
      what: "Baton's prompt in the transcript",
    });
    const record = join(fx.runDir, `session-${sessionId}`, 'req-own-2');
    const pid = (JSON.parse(readFileSync(join(record, 'started.json'), 'utf8')) as { programPid: number }).programPid;
    await eventually(() => expect(sessionFiles()).toContainEqual(expect.objectContaining({ pid, sessionId })), {
      what: "Baton's claude in sessions/",
    });
    // Busy by its run record; and the look for other turns, asked alone, sees its claude as Baton's.
    expect(await a.isBusy(target, never)).toBe(true);
    const query = {
      configDir: fx.configDir,
      sessionId,
      transcript: path,
      unfinishedTurnMs: 600_000,
      now: Date.now(),
      isBatonRun: async (id: string) => existsSync(join(fx.runDir, `session-${sessionId}`, id)),
    };
    expect(await findForeignTurn(query)).toBeNull();
    expect(await findForeignTurn({ ...query, isBatonRun: async () => false })).toMatch(
      new RegExp(`claude process Baton did not start \\(pid ${pid}`),
    );

    process.kill(-pid, 'SIGKILL');
    await eventually(() => expect(existsSync(join(record, 'exit.json'))).toBe(true), { what: 'the supervisor recorded the kill' });
    held.release();
    // The transcript now ends in Baton's own unanswered prompt, written moments ago: not a person's turn.
    expect(fx.transcriptPrompts(path).at(-1)).toContain('baton-request-id: req-own-2');
    expect(await a.isBusy(target, never)).toBe(false);
    expect((await a.sendTurn(target, turn('req-own-3', 'the next turn'), never)).outcome).toBe('accepted');
    expect(await a.waitForTurn(target, 'req-own-3', { onRunning: async () => undefined }, never)).toMatchObject({ status: 'returned' });
  }, 90_000);

  it("counts a person's claude that died mid-turn as busy only for unfinishedTurnMs after its transcript's last write (the stale-transcript bound)", async () => {
    const handle = 'crashed';
    const sessionId = randomUUID();
    await fx.personsTurn(handle, 'start the session by hand', { create: sessionId });
    const unfinishedTurnMs = 120_000;
    const settings = fx.settings(handle, { unfinishedTurnMs });
    const target: DeliveryTarget = { agentId: randomUUID(), handle, target: sessionId, settings };
    const path = transcriptPath(fx.configDir, settings.cwd, sessionId);
    const held = hold();
    // Baton's turn (its marker) first: claude sends an unanswered prompt again with the next one.
    fx.script(handle, (ex) =>
      markerOf(ex) === null && ex.prompt.includes('a question that never gets its answer')
        ? { kind: 'reply', text: 'too late', until: held.until }
        : { kind: 'reply', text: 'handled' },
    );
    const person = fx.personsClaude(handle, 'a question that never gets its answer', { resume: sessionId });
    await eventually(() => expect(fx.requestsOf(handle).some((ex) => ex.prompt.includes('never gets its answer'))).toBe(true), {
      what: "the person's turn at the model",
      timeoutMs: 30_000,
    });
    await eventually(() => expect(fx.transcriptPrompts(path).at(-1)).toBe('a question that never gets its answer'), {
      what: "the person's prompt in the transcript",
    });
    // Killed mid-turn: its sessions file stays behind (a dead pid), its prompt stays unanswered.
    person.kill('SIGKILL');
    await exited(person);
    held.release();
    expect(sessionFiles()).toContainEqual(expect.objectContaining({ pid: person.pid, sessionId }));
    const lastWrite = statSync(path).mtimeMs;

    // Within the bound: busy by the transcript alone (no live process).
    const within = adapter({ now: () => lastWrite + unfinishedTurnMs - 1_000 });
    expect(await within.isBusy(target, never)).toBe(true);
    const refused = await within.sendTurn(target, turn('req-crashed-1', 'too early'), never);
    expect(refused).toMatchObject({
      outcome: 'busy',
      detail: expect.stringContaining('ends in an unanswered prompt of a turn Baton did not start'),
    });
    expect(
      fx
        .requestsOf(handle)
        .map(markerOf)
        .filter((m) => m !== null),
    ).toEqual([]);
    // Past it: stale, the session takes the turn.
    const past = adapter({ now: () => lastWrite + unfinishedTurnMs + 1 });
    expect(await past.isBusy(target, never)).toBe(false);
    // unfinishedTurnMs 0: the transcript alone never makes the session busy.
    const off = { ...target, settings: { ...settings, unfinishedTurnMs: 0 } };
    expect(await within.isBusy(off, never)).toBe(false);
    expect((await past.sendTurn(target, turn('req-crashed-2', 'now it may'), never)).outcome).toBe('accepted');
    expect(await past.waitForTurn(target, 'req-crashed-2', { onRunning: async () => undefined }, never)).toMatchObject({
      status: 'returned',
      result: { summary: 'handled' },
    });
  }, 90_000);
});

describe('the process evidence, one piece at a time (a stand-in process with the files claude writes)', () => {
  const sessionId = randomUUID();
  let configDir: string;
  const query = (over: Partial<Parameters<typeof findForeignTurn>[0]> = {}) =>
    findForeignTurn({
      configDir,
      sessionId,
      transcript: join(configDir, 'none.jsonl'),
      unfinishedTurnMs: 600_000,
      now: Date.now(),
      isBatonRun: async () => false,
      ...over,
    });
  /** A live process; `args` after `--` show in its command line. */
  const standIn = (args: string[] = [], env: Record<string, string> = {}) => {
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', '--', ...args], {
      stdio: 'ignore',
      env: { ...inheritedEnv(process.env), ...env },
    });
    stopAfter.push(child);
    return child;
  };
  const stopAfter: ChildProcess[] = [];
  const procStart = (pid: number) => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  };
  const sessionFile = (pid: number, fields: Record<string, unknown>) => {
    mkdirSync(join(configDir, 'sessions'), { recursive: true });
    writeFileSync(
      join(configDir, 'sessions', `${pid}.json`),
      JSON.stringify({ pid, sessionId, procStart: fields['procStart'] ?? procStart(pid), kind: 'interactive', ...fields }),
    );
  };

  beforeAll(() => {
    configDir = join(fx.root, 'evidence-config');
    mkdirSync(configDir, { recursive: true });
  });
  afterAll(async () => {
    const running = stopAfter.filter((c) => c.exitCode === null && c.signalCode === null);
    await Promise.all(
      running.map(async (c) => {
        const gone = exited(c);
        c.kill('SIGKILL');
        await gone;
      }),
    );
  });

  it("reads a sessions file by its TUI status: busy and waiting are a turn, idle and shell are a person's claude open between turns", async () => {
    const p = standIn();
    await eventually(() => expect(existsSync(`/proc/${p.pid}/stat`)).toBe(true));
    const pid = p.pid as number;
    for (const status of ['busy', 'waiting']) {
      sessionFile(pid, { status });
      expect(await query(), status).toContain(`pid ${pid}, ${status}`);
    }
    for (const status of ['idle', 'shell']) {
      sessionFile(pid, { status });
      expect(await query(), status).toBeNull();
    }
    // Print mode writes no status: a live process is a turn.
    sessionFile(pid, {});
    expect(await query()).toContain(`pid ${pid}, running`);
    // Another session's process, a reused pid (another start time), or a dead one: not this session's turn.
    sessionFile(pid, { sessionId: randomUUID() });
    expect(await query()).toBeNull();
    sessionFile(pid, { procStart: '1' });
    expect(await query()).toBeNull();
    const gone = exited(p);
    p.kill('SIGKILL');
    await gone;
    sessionFile(pid, { status: 'busy', procStart: '1' });
    expect(await query()).toBeNull();
  });

  it('finds a process whose arguments name the session while it has no sessions file yet, unless Baton started it', async () => {
    expect(await query()).toBeNull();
    const starting = standIn(['-p', '--resume', sessionId.toUpperCase()]);
    await eventually(async () => expect(await query()).toContain(`pid ${starting.pid}`), { what: 'the process seen by its command line' });
    const baton = standIn([`--session-id=${randomUUID()}`]);
    expect(await query()).not.toContain(`pid ${baton.pid}`);
    const gone = exited(starting);
    starting.kill('SIGKILL');
    await gone;
    const ours = standIn(['--session-id', sessionId], { BATON_REQUEST_ID: 'req-ours' });
    await eventually(() => expect(readFileSync(`/proc/${ours.pid}/cmdline`, 'utf8')).toContain(sessionId));
    expect(await query({ isBatonRun: async (id) => id === 'req-ours' })).toBeNull();
    expect(await query()).toContain(`pid ${ours.pid}`);
  });
});

describe('the egress tripwire', () => {
  it('made no connection past loopback in any of these runs', () => {
    expect(fx.fake.exchanges.length).toBeGreaterThan(0);
    expect(fx.tripwire.attempts).toEqual([]);
  });
});
