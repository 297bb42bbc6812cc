import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppServerClient } from '../../libs/adapters/codex/app-server-client.ts';
import { daemonSettingsFile, ensureAppServerDaemon } from '../../libs/adapters/codex/app-server-daemon.ts';
import { createCodexAdapter, markerLine } from '../../libs/adapters/codex/create-codex-adapter.ts';
import type { DeliveryTarget, ProviderAdapter, TurnEnd, TurnRequest } from '../../libs/adapters/provider-adapter.ts';
import { validateProviderSettings } from '../../libs/adapters/provider-specs.ts';
import { startCodexFixture, type CodexFixture } from '../support/codex-fixture.ts';
import { eventually } from '../support/eventually.ts';
import { turnRequest } from '../support/turn-request.ts';

/**
 * The Codex adapter against the REAL `codex app-server` daemon (@openai/codex 0.171.0, installed
 * by scripts/install-agent-clis.sh) and the fake Responses server on 127.0.0.1. Every test ends by
 * checking that nothing tried to leave the machine; the fixture stops the daemon afterwards.
 */

let fx: CodexFixture;
let adapter: ProviderAdapter;
let n = 0;
const never = new AbortController().signal;
const signal = () => AbortSignal.timeout(20_000);

const turn = (message: string): TurnRequest => turnRequest(message);

function target(threadOrHandle: string | null, extra: Record<string, unknown> = {}): DeliveryTarget {
  return {
    agentId: `agent-${++n}`,
    handle: 'eng',
    target: threadOrHandle,
    settings: { cwd: fx.cwd, codexHome: fx.codexHome, binary: fx.binary, ...extra },
  };
}

/** The thread's turns as a separate connection to the daemon reads them. */
async function turnsOf(threadId: string): Promise<
  Array<{
    id: string;
    status: string;
    items: Array<{ type: string; clientId?: string; text?: string; content?: Array<{ text?: string }> }>;
  }>
> {
  const reader = new AppServerClient({ binary: fx.binary, codexHome: fx.codexHome, env: fx.env });
  await reader.start();
  try {
    const page = (await reader.call('thread/turns/list', { threadId, sortDirection: 'asc', itemsView: 'full', limit: 100 }, signal())) as {
      data: any[];
    };
    return page.data;
  } finally {
    await reader.close();
  }
}

async function follow(t: DeliveryTarget, requestId: string): Promise<{ end: TurnEnd; ran: boolean }> {
  let ran = false;
  const end = await adapter.waitForTurn(t, requestId, { onRunning: async () => void (ran = true) }, signal());
  return { end, ran };
}

const markerTurns = (turns: Awaited<ReturnType<typeof turnsOf>>, requestId: string) =>
  turns.filter((t) =>
    t.items.some((i) => i.type === 'userMessage' && (i.content ?? []).some((c) => (c.text ?? '').includes(markerLine(requestId)))),
  );

beforeAll(async () => {
  fx = await startCodexFixture();
  adapter = createCodexAdapter({ baseEnv: fx.env, pollMs: 100 });
});

afterAll(async () => {
  await adapter?.close();
  await fx?.close();
});

describe('the Codex adapter against the real codex app-server', () => {
  it('writes a handoff as exactly one new turn of an existing thread, visible in its history with the request id, and returns the final answer', async () => {
    const threadId = await fx.execThread('an earlier conversation');
    const before = await turnsOf(threadId);
    expect(before).toHaveLength(1);
    const t = target(threadId);
    const req = turn('please review the login form');
    fx.fake.script((x) => ({ kind: 'reply', text: x.prompt.includes(req.requestId) ? 'the login form looks good' : 'other' }));
    const requestsBefore = fx.fake.exchanges.length;
    expect(await adapter.sendTurn(t, req, signal())).toEqual({ outcome: 'accepted' });
    const { end, ran } = await follow(t, req.requestId);
    expect(ran).toBe(true);
    expect(end).toMatchObject({ status: 'returned', result: { summary: 'the login form looks good' } });
    const after = await turnsOf(threadId);
    expect(after, 'one new turn, after the existing one').toHaveLength(2);
    expect(after[0]!.id).toBe(before[0]!.id);
    expect(markerTurns(after, req.requestId).map((x) => x.id)).toEqual([after[1]!.id]);
    expect(after[1]!.items.find((i) => i.type === 'userMessage')?.clientId).toBe(req.requestId);
    // One model call carried the turn, and it continued the thread's history.
    const calls = fx.fake.exchanges.slice(requestsBefore).filter((x) => x.allText.includes(req.requestId));
    expect(calls).toHaveLength(1);
    expect(calls[0]!.allText).toContain('an earlier conversation');
    // Observation from a fresh adapter (a restarted worker) finds it by its marker.
    const fresh = createCodexAdapter({ baseEnv: fx.env });
    try {
      expect(await fresh.observeTurn(t, req.requestId, signal())).toMatchObject({
        found: true,
        status: 'returned',
        result: { summary: 'the login form looks good' },
      });
      expect(await fresh.observeTurn(t, 'req-never-sent', signal())).toEqual({ found: false, complete: true });
    } finally {
      await fresh.close();
    }
  }, 30_000);

  it('answers busy while the thread is in a turn, writes nothing then, and writes the next handoff after the turn ends', async () => {
    const t = target(await fx.execThread('setup'));
    const first = turn('first, slow');
    const second = turn('second');
    const held = fx.hold('first finished');
    fx.fake.script((x) => (x.prompt.includes(first.requestId) ? held.behaviour : { kind: 'reply', text: 'second finished' }));
    expect(await adapter.sendTurn(t, first, signal())).toEqual({ outcome: 'accepted' });
    const following = follow(t, first.requestId);
    await eventually(async () => expect(fx.fake.exchanges.some((x) => x.prompt.includes(first.requestId))).toBe(true), {
      what: 'the first turn reached the model',
    });
    expect(await adapter.isBusy(t, signal())).toBe(true);
    expect(await adapter.sendTurn(t, second, signal())).toMatchObject({ outcome: 'busy' });
    held.release();
    expect((await following).end).toMatchObject({ status: 'returned', result: { summary: 'first finished' } });
    expect(await adapter.isBusy(t, signal())).toBe(false);
    expect(await adapter.sendTurn(t, second, signal())).toEqual({ outcome: 'accepted' });
    expect((await follow(t, second.requestId)).end).toMatchObject({ status: 'returned', result: { summary: 'second finished' } });
    // Never steered into the running turn: two separate turns, in order, one request id each.
    const turns = await turnsOf(t.target!);
    expect(turns.map((x) => markerTurns([x], first.requestId).length + markerTurns([x], second.requestId).length)).toEqual([0, 1, 1]);
    expect(markerTurns(turns, first.requestId)[0]!.id).toBe(turns[1]!.id);
    expect(markerTurns(turns, second.requestId)[0]!.id).toBe(turns[2]!.id);
  }, 30_000);

  it('counts a turn another process runs on the thread as busy (Codex would steer into it)', async () => {
    const threadId = await fx.execThread('setup');
    const held = fx.hold('outside answer');
    fx.fake.script((x) => (x.prompt.includes('outside Baton') ? held.behaviour : { kind: 'reply', text: 'ok' }));
    const outside = fx.execThread('a turn started outside Baton', threadId);
    await eventually(async () => expect(fx.fake.exchanges.some((x) => x.prompt.includes('outside Baton'))).toBe(true), {
      what: 'the outside turn is running',
    });
    const t = target(threadId);
    const req = turn('must wait');
    expect(await adapter.sendTurn(t, req, signal())).toMatchObject({ outcome: 'busy' });
    expect(fx.fake.exchanges.some((x) => x.allText.includes(req.requestId))).toBe(false);
    held.release();
    await outside;
    expect(await adapter.isBusy(t, signal())).toBe(false);
  }, 30_000);

  it('ends a turn whose model call fails as FAILED with the error', async () => {
    const t = target(await fx.execThread('setup'));
    const req = turn('this will fail');
    fx.fake.script((x) =>
      x.prompt.includes(req.requestId) ? { kind: 'stream_error', message: 'the model exploded' } : { kind: 'reply', text: 'ok' },
    );
    expect(await adapter.sendTurn(t, req, signal())).toEqual({ outcome: 'accepted' });
    const { end } = await follow(t, req.requestId);
    expect(end.status).toBe('failed');
    expect(end.status === 'failed' && end.error).toContain('the model exploded');
    const fresh = createCodexAdapter({ baseEnv: fx.env });
    try {
      expect(await fresh.observeTurn(t, req.requestId, signal())).toMatchObject({ found: true, status: 'failed' });
    } finally {
      await fresh.close();
    }
  }, 30_000);

  it('starts a thread for an agent registered without one, binds it, and keeps writing into that same thread', async () => {
    const t = target('eng');
    fx.fake.script(() => ({ kind: 'reply', text: 'ok' }));
    const first = createCodexAdapter({ baseEnv: fx.env, pollMs: 100 });
    const a = turn('first ever');
    try {
      expect(await first.observeTurn(t, 'req-none', signal())).toEqual({ found: false, complete: true });
      expect(await first.sendTurn(t, a, signal())).toEqual({ outcome: 'accepted' });
      expect((await first.waitForTurn(t, a.requestId, { onRunning: async () => undefined }, signal())).status).toBe('returned');
      // Another worker of the pool, while this one is still connected, writes the same thread:
      // both reach it through the Codex home's daemon, so neither holds it against the other.
      const other = createCodexAdapter({ baseEnv: fx.env, pollMs: 100 });
      try {
        const elsewhere = turn('from another worker');
        expect(await other.sendTurn(t, elsewhere, signal())).toEqual({ outcome: 'accepted' });
        expect((await other.waitForTurn(t, elsewhere.requestId, { onRunning: async () => undefined }, signal())).status).toBe('returned');
        expect(await first.observeTurn(t, elsewhere.requestId, signal())).toMatchObject({ found: true, status: 'returned' });
      } finally {
        await other.close();
      }
    } finally {
      await first.close();
    }
    // The next worker finds the same thread through the binding in the Codex home.
    const fresh = createCodexAdapter({ baseEnv: fx.env });
    try {
      const b = turn('second');
      expect(await fresh.sendTurn(t, b, signal())).toEqual({ outcome: 'accepted' });
      expect((await fresh.waitForTurn(t, b.requestId, { onRunning: async () => undefined }, signal())).status).toBe('returned');
      expect(await fresh.observeTurn(t, a.requestId, signal())).toMatchObject({ found: true, status: 'returned' });
      const bound = fx.fake.exchanges.filter((x) => x.allText.includes(b.requestId));
      expect(bound.at(-1)!.allText, "the second turn continued the first one's thread").toContain(a.requestId);
    } finally {
      await fresh.close();
    }
  }, 30_000);

  it('holds a thread only while a write or turn of its own is in it: the daemon unloads it after the turn, and after a write that found it busy, so the user can resume it', async () => {
    const loadedThreads = async (): Promise<string[]> => {
      const reader = new AppServerClient({ binary: fx.binary, codexHome: fx.codexHome, env: fx.env });
      await reader.start();
      try {
        return ((await reader.call('thread/loaded/list', {}, signal())) as { data: string[] }).data;
      } finally {
        await reader.close();
      }
    };
    const t = target('holder');
    fx.fake.script(() => ({ kind: 'reply', text: 'ok' }));
    const first = turn('the first turn, in a thread Baton starts');
    expect(await adapter.sendTurn(t, first, signal())).toEqual({ outcome: 'accepted' });
    const { end } = await follow(t, first.requestId);
    const threadId = (end.status === 'returned' && (end.result.output as { threadId: string }).threadId) || '';
    expect(await loadedThreads(), 'released once the turn ended').not.toContain(threadId);
    expect(await fx.execThread('the user takes a turn', threadId)).toBe(threadId);
    // Another worker's turn runs in the thread: this worker's write finds it busy and lets go of it.
    const other = createCodexAdapter({ baseEnv: fx.env, pollMs: 100 });
    try {
      const long = turn('a long turn of another worker');
      const held = fx.hold('the long answer');
      fx.fake.script((x) => (x.prompt.includes(long.requestId) ? held.behaviour : { kind: 'reply', text: 'ok' }));
      expect(await other.sendTurn(t, long, signal())).toEqual({ outcome: 'accepted' });
      await eventually(async () => expect(fx.fake.exchanges.some((x) => x.prompt.includes(long.requestId))).toBe(true), {
        what: 'the long turn is running',
      });
      expect(await adapter.sendTurn(t, turn('must wait'), signal())).toMatchObject({ outcome: 'busy' });
      held.release();
      expect(await other.waitForTurn(t, long.requestId, { onRunning: async () => undefined }, signal())).toMatchObject({
        status: 'returned',
      });
    } finally {
      await other.close();
    }
    await eventually(async () => expect(await loadedThreads()).not.toContain(threadId), { what: 'neither worker holds the thread' });
    expect(await fx.execThread('the user again', threadId)).toBe(threadId);
  }, 40_000);

  it('keeps a turn running when its worker goes away mid-turn: the next worker follows it to RETURNED with the answer, written once', async () => {
    const t = target(await fx.execThread('setup'));
    const req = turn('outlives its worker');
    const held = fx.hold('the answer after the worker left');
    fx.fake.script((x) => (x.prompt.includes(req.requestId) ? held.behaviour : { kind: 'reply', text: 'ok' }));
    const own = createCodexAdapter({ baseEnv: fx.env, pollMs: 100 });
    expect(await own.sendTurn(t, req, signal())).toEqual({ outcome: 'accepted' });
    await eventually(async () => expect(fx.fake.exchanges.some((x) => x.prompt.includes(req.requestId))).toBe(true), {
      what: 'the turn is running',
    });
    const daemon = fx.daemonPid();
    // Its worker goes away (its connection to the daemon closes, as when the worker is killed);
    // the daemon, and the turn in it, carry on.
    await own.close();
    const next = createCodexAdapter({ baseEnv: fx.env, pollMs: 100 });
    try {
      expect(await next.observeTurn(t, req.requestId, signal())).toEqual({ found: true, status: 'running' });
      expect(await next.isBusy(t, signal()), 'the thread is still in that turn').toBe(true);
      held.release();
      expect(await next.waitForTurn(t, req.requestId, { onRunning: async () => undefined }, signal())).toMatchObject({
        status: 'returned',
        result: { summary: 'the answer after the worker left' },
      });
    } finally {
      await next.close();
    }
    expect(fx.daemonPid(), 'the same daemon ran it throughout').toBe(daemon);
    expect(
      fx.fake.exchanges.filter((x) => x.prompt.includes(req.requestId)),
      'written once',
    ).toHaveLength(1);
    expect(markerTurns(await turnsOf(t.target!), req.requestId).map((x) => x.status)).toEqual(['completed']);
  }, 30_000);

  it('runs one daemon per Codex home however many workers start it at once, and never lets it update itself', async () => {
    await fx.stopDaemon();
    const starts = await Promise.all(
      [1, 2, 3].map(() => ensureAppServerDaemon({ binary: fx.binary, codexHome: fx.codexHome, env: fx.env }, signal())),
    );
    expect(starts.map((x) => x.status).sort()).toEqual(['alreadyRunning', 'alreadyRunning', 'started']);
    expect(new Set(starts.map((x) => x.socketPath)).size).toBe(1);
    expect(fx.daemonPid()).not.toBeNull();
    // The self-updater (`pid-update-loop`, which fetches and runs chatgpt.com's install.sh) is off.
    expect(JSON.parse(readFileSync(daemonSettingsFile(fx.codexHome), 'utf8'))).toMatchObject({ updater: { autoUpdateEnabled: false } });
    expect(existsSync(join(fx.codexHome, 'app-server-daemon', 'daemon-updater.pid')), 'no updater was started').toBe(false);
    // A restarted daemon serves the adapter again (its connection is replaced).
    const t = target(await fx.execThread('setup'));
    const req = turn('after a daemon restart');
    fx.fake.script(() => ({ kind: 'reply', text: 'still here' }));
    // Its connection to the stopped daemon closed; the next one waits out a short back-off.
    await eventually(async () => expect(await adapter.isBusy(t, signal())).toBe(false), {
      what: 'the adapter reconnected to the new daemon',
    });
    expect(await adapter.sendTurn(t, req, signal())).toEqual({ outcome: 'accepted' });
    expect((await follow(t, req.requestId)).end).toMatchObject({ status: 'returned', result: { summary: 'still here' } });
  }, 30_000);

  it('refuses settings that would block a headless turn, and a working directory that does not exist', async () => {
    expect(() => validateProviderSettings('codex', { cwd: fx.cwd, approvalPolicy: 'on-request' })).toThrow(/approvalPolicy/);
    expect(() => validateProviderSettings('codex', { cwd: 'relative/dir' })).toThrow(/absolute/);
    expect(() => validateProviderSettings('codex', { cwd: fx.cwd, sandbox: 'anything' })).toThrow(/invalid_settings|not valid/);
    expect(() =>
      validateProviderSettings('codex', { cwd: fx.cwd, approvalPolicy: 'never', sandbox: 'read-only', model: 'gpt-5.5' }),
    ).not.toThrow();
    expect(await adapter.sendTurn(target(null, { cwd: `${fx.cwd}/missing` }), turn('x'), never)).toMatchObject({ outcome: 'rejected' });
    expect(await adapter.sendTurn(target(null, { binary: `${fx.root}/no-codex-here` }), turn('x'), never)).toMatchObject({
      outcome: 'rejected',
    });
  });

  it('made no connection beyond loopback', () => {
    expect(fx.tripwire.attempts).toEqual([]);
    expect(fx.fake.refusedConnections).toBe(0);
    expect(fx.fake.unmatched).toEqual([]);
  });
});
