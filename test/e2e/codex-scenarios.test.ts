import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppServerClient } from '../../libs/adapters/codex/app-server-client.ts';
import { markerLine } from '../../libs/adapters/codex/create-codex-adapter.ts';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { startCodexFixture, type CodexFixture } from '../support/codex-fixture.ts';
import { eventually } from '../support/eventually.ts';
import { SPAWNED_FIRST_TURN_MS, spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * The scenarios end to end: Baton's API, Postgres, Redis and delivery workers (in
 * process, and a real `baton worker` process killed with SIGKILL) against the REAL
 * `codex app-server` daemon, with the fake Responses server as its model. No connection leaves
 * loopback; the fixture stops the daemon at the end.
 */

let baton: TestBaton;
let fx: CodexFixture;
const processes: BatonProcess[] = [];

beforeAll(async () => {
  fx = await startCodexFixture();
  baton = await startTestBaton({ queueShards: 2 });
  expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop('SIGKILL')));
  await baton?.stop();
  await fx?.close();
});

async function codexAgent(handle: string): Promise<string> {
  const threadId = await fx.execThread(`the conversation of ${handle} so far`);
  const res = await baton.post('/v1/agents', {
    id: handle,
    provider: 'codex',
    target: threadId,
    settings: { cwd: fx.cwd, codexHome: fx.codexHome, binary: fx.binary },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return threadId;
}

async function send(to: string, title: string): Promise<string> {
  const res = await baton.post('/v1/handoffs', { from: 'lead', to, title, message: `please: ${title}` });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
}

async function turnsOf(
  threadId: string,
): Promise<Array<{ status: string; items: Array<{ type: string; content?: Array<{ text?: string }> }> }>> {
  const reader = new AppServerClient({ binary: fx.binary, codexHome: fx.codexHome, env: fx.env });
  await reader.start();
  try {
    return (
      (await reader.call(
        'thread/turns/list',
        { threadId, sortDirection: 'asc', itemsView: 'full', limit: 100 },
        AbortSignal.timeout(10_000),
      )) as { data: any[] }
    ).data;
  } finally {
    await reader.close();
  }
}

const carrying = (turns: Awaited<ReturnType<typeof turnsOf>>, requestId: string) =>
  turns.filter((t) =>
    t.items.some((i) => i.type === 'userMessage' && (i.content ?? []).some((c) => (c.text ?? '').includes(markerLine(requestId)))),
  );
const requestIdOf = (h: any): string => h.attempts[h.attempts.length - 1].requestId;
const modelCallsFor = (requestId: string) => fx.fake.exchanges.filter((x) => x.prompt.includes(markerLine(requestId)));

describe('Codex scenarios through Baton, with the real codex app-server', () => {
  it('lands handoffs as one new turn each in the existing thread, RETURNED with the final answer; a second one waits as BUSY and goes after, in order', async () => {
    const worker = baton.startWorker({
      adapters: createAdapters(['codex'], { demoHost: undefined, codex: { baseEnv: fx.env, pollMs: 100 } }),
    });
    try {
      const threadId = await codexAgent('eng');
      const held = fx.hold('the first answer');
      fx.fake.script((x) => (x.prompt.includes('please: first') ? held.behaviour : { kind: 'reply', text: 'the second answer' }));
      const first = await send('eng', 'first');
      await waitForState(baton, first, 'RUNNING', 20_000);
      const second = await send('eng', 'second');
      await eventually(async () => expect((await baton.get(`/v1/handoffs/${second}`)).body.state).toBe('BUSY'), {
        what: 'the second handoff waits as BUSY',
      });
      held.release();
      const h1 = await waitForState(baton, first, 'RETURNED', 20_000);
      const h2 = await waitForState(baton, second, 'RETURNED', 20_000);
      expect(h1.resultSummary ?? h1.result?.summary).toBe('the first answer');
      expect(h2.resultSummary ?? h2.result?.summary).toBe('the second answer');
      const turns = await turnsOf(threadId);
      expect(turns, 'the earlier turn, then one new turn per handoff').toHaveLength(3);
      expect(carrying(turns, requestIdOf(h1))).toEqual([turns[1]]);
      expect(carrying(turns, requestIdOf(h2))).toEqual([turns[2]]);
      expect(modelCallsFor(requestIdOf(h1))).toHaveLength(1);
      expect(modelCallsFor(requestIdOf(h2))).toHaveLength(1);
      // Written after the first turn's answer, never into it.
      expect(modelCallsFor(requestIdOf(h2))[0]!.allText).toContain('the first answer');
    } finally {
      await worker.stop();
    }
  }, 60_000);

  it('ends a handoff whose model fails as FAILED, with the model error in its timeline', async () => {
    const worker = baton.startWorker({
      adapters: createAdapters(['codex'], { demoHost: undefined, codex: { baseEnv: fx.env, pollMs: 100 } }),
    });
    try {
      await codexAgent('broken');
      fx.fake.script((x) =>
        x.prompt.includes('please: doomed') ? { kind: 'stream_error', message: 'the model is on fire' } : { kind: 'reply', text: 'ok' },
      );
      const id = await send('broken', 'doomed');
      const h = await waitForState(baton, id, 'FAILED', 30_000);
      expect(JSON.stringify(h.events)).toContain('the model is on fire');
      expect(h.attempts.every((a: any) => a.status === 'failed')).toBe(true);
    } finally {
      await worker.stop();
    }
  }, 60_000);

  it("shares the thread with its user: Baton lets go of it after each turn, the user resumes it with codex exec between handoffs, a handoff waits as BUSY while the user's turn runs, and Baton writes the next turns after", async () => {
    const worker = baton.startWorker({
      adapters: createAdapters(['codex'], { demoHost: undefined, codex: { baseEnv: fx.env, pollMs: 100 } }),
    });
    try {
      const threadId = await codexAgent('shared');
      fx.fake.script(() => ({ kind: 'reply', text: 'ok' }));
      const h1 = await waitForState(baton, await send('shared', 'first from baton'), 'RETURNED', 20_000);
      // Right after Baton's turn the thread is the user's: their own `codex exec resume` gets a
      // turn (it fails with "already has an active writer" while a daemon holds the thread).
      expect(await fx.execThread('the user asks in between', threadId)).toBe(threadId);
      const h2 = await waitForState(baton, await send('shared', 'second from baton'), 'RETURNED', 20_000);
      // The user resumes it again and their turn runs (the model holds its answer): a handoff
      // now waits as BUSY, nothing written, and is delivered once the user's turn is over.
      const held = fx.hold('the answer to the user');
      fx.fake.script((x) => (x.prompt.includes('the user is working') ? held.behaviour : { kind: 'reply', text: 'ok' }));
      const userTurn = fx.execThread('the user is working', threadId);
      await eventually(async () => expect(fx.fake.exchanges.some((x) => x.prompt.includes('the user is working'))).toBe(true), {
        what: "the user's turn reached the model",
      });
      const third = await send('shared', 'third from baton');
      await eventually(async () => expect((await baton.get(`/v1/handoffs/${third}`)).body.state).toBe('BUSY'), {
        timeoutMs: 20_000,
        what: "the third handoff waits as BUSY while the user's turn runs",
      });
      expect(
        fx.fake.exchanges.some((x) => x.prompt.includes('please: third from baton')),
        "nothing written into the user's turn",
      ).toBe(false);
      held.release();
      await userTurn;
      const h3 = await waitForState(baton, third, 'RETURNED', 20_000);
      const turns = await turnsOf(threadId);
      const userText = (t: (typeof turns)[number]) =>
        t.items
          .find((i) => i.type === 'userMessage')
          ?.content?.map((c) => c.text ?? '')
          .join('') ?? '';
      expect(turns.map((t) => t.status)).toEqual(['completed', 'completed', 'completed', 'completed', 'completed', 'completed']);
      expect(carrying(turns, requestIdOf(h1))).toEqual([turns[1]]);
      expect(userText(turns[2]!)).toBe('the user asks in between');
      expect(carrying(turns, requestIdOf(h2))).toEqual([turns[3]]);
      expect(userText(turns[4]!)).toBe('the user is working');
      expect(carrying(turns, requestIdOf(h3))).toEqual([turns[5]]);
      // And after the last one, the thread is the user's again.
      expect(await fx.execThread('the user has the last word', threadId)).toBe(threadId);
    } finally {
      await worker.stop();
    }
  }, 90_000);

  it(
    "a worker killed with SIGKILL mid-turn: the turn goes on in the daemon, and the next worker observes it to RETURNED with the model's answer, written once",
    async () => {
      const startWorker = () => {
        const w = spawnBaton(['worker'], {
          DATABASE_URL: baton.databaseUrl,
          REDIS_URL: process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379',
          BATON_REDIS_PREFIX: baton.prefix,
          BATON_QUEUE_SHARDS: '2',
          BATON_WORKER_PROVIDERS: 'codex',
          BATON_LOG_LEVEL: 'warn',
          BATON_TURN_LOCK_TTL_MS: '1000',
          BATON_JOB_LOCK_MS: '1000',
          BATON_STALLED_INTERVAL_MS: '300',
          BATON_RECONCILE_INTERVAL_MS: '300',
          ...fx.tripwire.env(),
        });
        processes.push(w);
        return w;
      };
      const threadId = await codexAgent('crashy');
      const held = fx.hold('the answer across the kill');
      fx.fake.script((x) => (x.prompt.includes('please: long') ? held.behaviour : { kind: 'reply', text: 'ok' }));
      const first = startWorker();
      const id = await send('crashy', 'long');
      const running = await waitForState(baton, id, 'RUNNING', SPAWNED_FIRST_TURN_MS);
      const requestId = requestIdOf(running);
      await eventually(async () => expect(modelCallsFor(requestId)).toHaveLength(1), { what: 'the turn reached the model' });
      const daemon = fx.daemonPid();
      await first.stop('SIGKILL');
      // The model holds its answer across the kill: the turn is still running in the daemon with
      // its worker gone, and the answer, released once the next worker is starting, reaches it.
      expect(
        carrying(await turnsOf(threadId), requestId).map((t) => t.status),
        'the turn outlived its worker',
      ).toEqual(['inProgress']);
      startWorker();
      held.release();
      const h = await waitForState(baton, id, 'RETURNED', SPAWNED_FIRST_TURN_MS);
      expect(h.resultSummary ?? h.result?.summary).toBe('the answer across the kill');
      expect(h.attempts.map((a: any) => a.status)).toEqual(['returned']);
      expect(fx.daemonPid(), 'the same daemon ran the turn throughout').toBe(daemon);
      expect(carrying(await turnsOf(threadId), requestId).map((t) => t.status)).toEqual(['completed']);
      expect(modelCallsFor(requestId), 'never written twice').toHaveLength(1);
    },
    3 * SPAWNED_FIRST_TURN_MS,
  );

  it('made no connection beyond loopback', () => {
    expect(fx.tripwire.attempts).toEqual([]);
    expect(fx.fake.refusedConnections).toBe(0);
  });
});
