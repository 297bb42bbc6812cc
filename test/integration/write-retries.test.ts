import { promises as fs } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { inheritedEnv } from '../../libs/adapters/command/create-command-adapter.ts';
import { DEFAULT_DELIVERY_WINDOWS, DELIVERY_POLICY, type DeliveryWindows } from '../../libs/domain/delivery-policy.ts';
import { ATTEMPT_HISTORY_SQL } from '../../libs/db/attempt-history-repository.ts';
import { countStatements } from '../support/count-statements.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * Writes that did not become a turn, through Baton's engine against real recipients on loopback:
 * a webhook endpoint that refuses connections and a command program that cannot be started
 * (issue "The edges that fail in production", item 14), and a command program that keeps
 * answering busy (item 15). The worker's back-offs are test-baton's: 100 ms after a busy answer,
 * 200 ms after a write that never left.
 */

const SECRET = 'a-webhook-secret-of-32-characters';
/** test-baton's worker timing (startWorker): the first waits of the two back-offs. */
const BUSY_RETRY_MS = 100;
const UNREACHABLE_RETRY_MS = 200;
const JITTER = DELIVERY_POLICY.retryJitter;
/** More writes than the old fixed budget allowed (three, then send_gave_up). */
const BEYOND_OLD_BUDGET = 4;

let baton: TestBaton;
let work: string;

beforeAll(async () => {
  baton = await startTestBaton();
  work = await fs.mkdtemp(join(tmpdir(), 'baton-write-retries-'));
  expect((await baton.post('/v1/agents', { id: 'sender', provider: 'manual' })).status).toBe(201);
});

afterAll(async () => {
  await baton?.stop();
  await fs.rm(work, { recursive: true, force: true });
});

const adapters = () =>
  createAdapters(['webhook', 'command'], {
    demoHost: baton.host,
    turnReports: baton.repos.turnReports,
    command: { runDir: join(work, 'runs'), baseEnv: inheritedEnv(process.env) },
  });
const windows = (w: Partial<DeliveryWindows> = {}): DeliveryWindows => ({ ...DEFAULT_DELIVERY_WINDOWS, errorResendDelayMs: 50, ...w });
const show = async (id: string) => (await baton.get(`/v1/handoffs/${id}`)).body;
const statuses = (h: any): string[] => h.attempts.map((a: any) => a.status);
const ms = (iso: string) => new Date(iso).getTime();

/** A loopback port nothing listens on (taken from the system, then closed): connections to it are refused. */
async function refusingPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function send(to: string, title: string): Promise<string> {
  const res = await baton.post('/v1/handoffs', { from: 'sender', to, title, message: `please: ${title}` });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/**
 * The waits the engine chose between writes that never left (each `send_failed` event's
 * `retryInMs`), checked against the time the next write actually started.
 */
function unsentWaits(h: any): number[] {
  const held = h.events.filter((e: any) => e.event === 'send_failed');
  held.forEach((e: any, i: number) => {
    const next = h.attempts[i + 1];
    if (next) expect(ms(next.startedAt) - ms(e.at), `write ${i + 2} waited its back-off`).toBeGreaterThanOrEqual(e.detail.retryInMs - 1);
  });
  return held.map((e: any) => e.detail.retryInMs as number);
}

describe('a recipient that cannot be reached (not_sent) holds its handoffs instead of failing them', () => {
  it('a webhook endpoint that refuses connections is written to again, with a growing back-off and no budget spent, and gets the turn once it listens', async () => {
    const port = await refusingPort();
    expect(
      (
        await baton.post('/v1/agents', {
          id: 'hook-down',
          provider: 'webhook',
          settings: { url: `http://127.0.0.1:${port}/turns`, secret: SECRET },
        })
      ).status,
    ).toBe(201);
    const worker = baton.startWorker({ adapters: adapters(), windows: windows() });
    const received: string[] = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push(body);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ summary: 'back up and done' }));
      });
    });
    try {
      const id = await send('hook-down', 'while the endpoint restarts');
      // The old engine gave up after three refused writes; this one holds the handoff WAITING
      // between writes, saying why.
      const held = await eventually(
        async () => {
          const h = await show(id);
          expect(h.state).not.toBe('FAILED');
          expect(statuses(h).filter((s) => s === 'not_sent').length).toBeGreaterThanOrEqual(BEYOND_OLD_BUDGET);
          expect(h.state).toBe('WAITING');
          return h;
        },
        { what: `${BEYOND_OLD_BUDGET} refused writes, still held`, timeoutMs: 10_000 },
      );
      expect(held.attempts[0].error).toMatch(/ECONNREFUSED/);
      expect(held.detail).toMatch(
        /^the recipient is unreachable \(ECONNREFUSED.*\); nothing left Baton, no attempt spent: \d+ writes in .*, the next in about .*, giving up at \S+Z$/,
      );
      // Like an outage: no attempt budget spent on it.
      expect((await baton.repos.handoffs.findById(id))?.errorResends).toBe(0);

      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
      const h = await waitForState(baton, id, 'RETURNED', 15_000);
      expect(h.result.summary).toBe('back up and done');
      expect(received).toHaveLength(1);
      const s = statuses(h);
      expect(s.at(-1)).toBe('returned');
      expect(s.slice(0, -1).every((x) => x === 'not_sent')).toBe(true);
      // 200 ms, then doubling, each ±20%.
      const waits = unsentWaits(h);
      waits.forEach((w, i) => {
        expect(w, `wait ${i + 1}`).toBeGreaterThanOrEqual(Math.floor(UNREACHABLE_RETRY_MS * 2 ** i * (1 - JITTER)));
        expect(w, `wait ${i + 1}`).toBeLessThanOrEqual(Math.ceil(UNREACHABLE_RETRY_MS * 2 ** i * (1 + JITTER)));
      });
      expect(JSON.parse(received[0]!).attempt, 'the first write that arrived is the first the recipient is handed').toBe(1);
    } finally {
      server.closeAllConnections();
      server.close();
      await worker.stop();
    }
  });

  it('gives up once the recipient has been unreachable for BATON_UNREACHABLE_GIVE_UP_MS, saying how long and what was tried', async () => {
    const giveUpMs = 1_500;
    const port = await refusingPort();
    expect(
      (
        await baton.post('/v1/agents', {
          id: 'hook-gone',
          provider: 'webhook',
          settings: { url: `http://127.0.0.1:${port}/turns`, secret: SECRET },
        })
      ).status,
    ).toBe(201);
    const worker = baton.startWorker({ adapters: adapters(), windows: windows({ unreachableGiveUpMs: giveUpMs }) });
    try {
      const id = await send('hook-gone', 'to an endpoint that stays down');
      // The last wait ends at the give-up time; the margin covers the writes and the test's polls.
      const h = await waitForState(baton, id, 'FAILED', giveUpMs + 10_000);
      const gaveUp = h.events.at(-1);
      expect(gaveUp.event).toBe('send_gave_up');
      expect(ms(gaveUp.at) - ms(h.attempts[0].startedAt), 'held for the whole give-up time').toBeGreaterThanOrEqual(giveUpMs);
      const writes = statuses(h).length;
      expect(statuses(h).every((s) => s === 'not_sent')).toBe(true);
      expect(writes).toBeGreaterThanOrEqual(BEYOND_OLD_BUDGET);
      expect(gaveUp.reason).toMatch(
        new RegExp(
          `^gave up: the recipient was unreachable for [\\d.]+ s \\(${writes} writes since \\S+, none of which left Baton; the last: ECONNREFUSED.*\\); the give-up time is 1\\.5 s \\(BATON_UNREACHABLE_GIVE_UP_MS\\)$`,
        ),
      );
      expect(h.detail).toBe(gaveUp.reason);
      expect(gaveUp.detail).toMatchObject({ writes, since: h.attempts[0].startedAt });
      expect(gaveUp.detail.unreachableForMs).toBeGreaterThanOrEqual(giveUpMs);
      // The last wait was cut to the give-up time: no write was planned past it (but for the
      // few ms between choosing the wait and recording it).
      const planned = h.events.filter((e: any) => e.event === 'send_failed').map((e: any) => ms(e.at) + e.detail.retryInMs);
      expect(Math.max(...planned)).toBeLessThanOrEqual(ms(h.attempts[0].startedAt) + giveUpMs + 50);
    } finally {
      await worker.stop();
    }
  });

  it('a command program that cannot start because its file is being written (ETXTBSY) is held the same way, and runs once the file is closed', async () => {
    const program = join(work, 'being-installed.sh');
    await fs.writeFile(program, '#!/bin/sh\necho installed and ran\n', { mode: 0o755 });
    // An installer with the program open for writing: exec(2) refuses it with ETXTBSY until it closes.
    const installer = await fs.open(program, 'r+');
    expect((await baton.post('/v1/agents', { id: 'installing', provider: 'command', settings: { argv: [program] } })).status).toBe(201);
    const worker = baton.startWorker({ adapters: adapters(), windows: windows() });
    let closed = false;
    try {
      const id = await send('installing', 'while the program is replaced');
      const held = await eventually(
        async () => {
          const h = await show(id);
          expect(h.state).not.toBe('FAILED');
          expect(statuses(h).filter((s) => s === 'not_sent').length).toBeGreaterThanOrEqual(BEYOND_OLD_BUDGET);
          return h;
        },
        { what: `${BEYOND_OLD_BUDGET} unstartable writes, still held`, timeoutMs: 10_000 },
      );
      expect(held.attempts[0].error).toMatch(/ETXTBSY/);
      await installer.close();
      closed = true;
      const h = await waitForState(baton, id, 'RETURNED', 15_000);
      expect(h.result.summary).toBe('installed and ran');
      expect(
        statuses(h)
          .slice(0, -1)
          .every((x) => x === 'not_sent'),
      ).toBe(true);
      expect((await baton.repos.handoffs.findById(id))?.errorResends).toBe(0);
    } finally {
      if (!closed) await installer.close();
      await worker.stop();
    }
  });

  it('a missing program is still configuration: refused at once (one retry), never held', async () => {
    expect(
      (await baton.post('/v1/agents', { id: 'no-program', provider: 'command', settings: { argv: [join(work, 'never-installed')] } }))
        .status,
    ).toBe(201);
    const worker = baton.startWorker({ adapters: adapters(), windows: windows() });
    try {
      const id = await send('no-program', 'to a typo');
      const h = await waitForState(baton, id, 'FAILED', 10_000);
      expect(statuses(h)).toEqual(['rejected', 'rejected']);
      expect(h.attempts[0].error).toMatch(/cannot start .*never-installed/);
    } finally {
      await worker.stop();
    }
  });
});

describe('busy answers back off and spend no attempt', () => {
  it('a command program that keeps exiting 75 is started again after growing, jittered waits, and BATON_ATTEMPT stays 1 until it takes the turn', async () => {
    const log = join(work, 'attempts.log');
    const gate = join(work, 'free');
    const program = join(work, 'busy-until-free.mjs');
    await fs.writeFile(
      program,
      `import { appendFileSync, existsSync } from 'node:fs';
appendFileSync(${JSON.stringify(log)}, process.env.BATON_ATTEMPT + '\\n');
if (!existsSync(${JSON.stringify(gate)})) { process.stderr.write('still on the last task'); process.exit(75); }
process.stdout.write('done at last');
`,
    );
    expect(
      (await baton.post('/v1/agents', { id: 'always-busy', provider: 'command', settings: { argv: [process.execPath, program] } })).status,
    ).toBe(201);
    const worker = baton.startWorker({ adapters: adapters(), windows: windows() });
    const historyReads = countStatements(baton.db.pool, ATTEMPT_HISTORY_SQL);
    const runs = async () => (await fs.readFile(log, 'utf8').catch(() => '')).split('\n').filter((l) => l !== '');
    try {
      const id = await send('always-busy', 'when you are free');
      const busyRuns = 5;
      // 100 + 200 + 400 + 800 ms of waits (+20%), and the runs themselves.
      await eventually(async () => expect((await runs()).length).toBeGreaterThanOrEqual(busyRuns), {
        what: `${busyRuns} busy runs`,
        timeoutMs: 15_000,
      });
      await fs.writeFile(gate, '');
      const h = await waitForState(baton, id, 'RETURNED', 15_000);
      expect(h.result.summary).toBe('done at last');

      const busy = h.events.filter((e: any) => e.event === 'session_busy');
      expect(busy.length).toBeGreaterThanOrEqual(busyRuns);
      const waits = busy.map((e: any) => e.detail?.retryInMs as number);
      // 100 ms after the first busy answer, doubling with each one in a row, each ±20%: never a fixed pace.
      waits.forEach((w: number, i: number) => {
        expect(w, `wait after busy answer ${i + 1}`).toBeGreaterThanOrEqual(Math.floor(BUSY_RETRY_MS * 2 ** i * (1 - JITTER)));
        expect(w, `wait after busy answer ${i + 1}`).toBeLessThanOrEqual(Math.ceil(BUSY_RETRY_MS * 2 ** i * (1 + JITTER)));
        if (i > 0) expect(w, `wait ${i + 1} longer than wait ${i}`).toBeGreaterThan(waits[i - 1]);
      });
      // And the program really was left alone that long each time.
      busy.forEach((e: any, i: number) => {
        const next = h.attempts[i + 1];
        expect(ms(next.startedAt) - ms(e.at), `run ${i + 2} waited its back-off`).toBeGreaterThanOrEqual(waits[i]! - 1);
      });

      // Every write is an attempt row (numbered 1..n), but busy spends no attempt: each run,
      // the one that finally did the work included, was told it is the first time.
      expect(h.attempts.map((a: any) => a.number)).toEqual(h.attempts.map((_: unknown, i: number) => i + 1));
      expect(statuses(h)).toEqual([...Array(h.attempts.length - 1).fill('busy'), 'returned']);
      expect(await runs()).toEqual(Array(h.attempts.length).fill('1'));
      const row = await baton.repos.handoffs.findById(id);
      expect(row).toMatchObject({ refusals: 0, errorResends: 0, interruptResends: 0 });
      // The busy answers in a row are read from the attempts once per write again (none for the first).
      expect(historyReads.count()).toBe(h.attempts.length - 1);
    } finally {
      historyReads.stop();
      await worker.stop();
    }
  });

  it('costs a normal turn no extra statement: a first write reads no attempt history', async () => {
    const program = join(work, 'quick.mjs');
    await fs.writeFile(program, `process.stdout.write('attempt ' + process.env.BATON_ATTEMPT);`);
    expect(
      (await baton.post('/v1/agents', { id: 'quick', provider: 'command', settings: { argv: [process.execPath, program] } })).status,
    ).toBe(201);
    const worker = baton.startWorker({ adapters: adapters(), windows: windows() });
    const historyReads = countStatements(baton.db.pool, ATTEMPT_HISTORY_SQL);
    try {
      const id = await send('quick', 'a normal turn');
      const h = await waitForState(baton, id, 'RETURNED', 10_000);
      expect(h.result.summary).toBe('attempt 1');
      expect(historyReads.count()).toBe(0);
    } finally {
      historyReads.stop();
      await worker.stop();
    }
  });
});
