import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { startReconciler } from '../../workers/timers/start-reconciler.ts';
import type { RunningDeliveryWorker } from '../../workers/delivery/start-delivery-worker.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * Issue item 11: a webhook turn that went UNCERTAIN could not be settled by its callback when
 * the agent has no status URL. The callback was answered 200 "recorded", but the history scan
 * had already found nothing (an incomplete scan: its next one 5 minutes later), so the handoff
 * stayed UNCERTAIN. A recorded final report makes the turn observable at once: the owner's
 * reconciler settles it within one interval.
 */
const SECRET = 'a-webhook-secret-of-32-characters';
/** The reconciler's interval in these tests (BATON_RECONCILE_INTERVAL_MS). */
const INTERVAL_MS = 300;
/** What a loaded 2-core machine may add to one interval: the pass's statements and the turn's end. */
const MARGIN_MS = 3_000;
/** The write deadline: the agent answers later than this. */
const WRITE_MS = 300;

let baton: TestBaton;
let worker: RunningDeliveryWorker;
let reconciler: { stop(): Promise<void> };
let passes = 0;
const servers: http.Server[] = [];

function signed(body: string): Record<string, string> {
  const timestamp = String(Math.floor(Date.now() / 1000));
  return {
    'content-type': 'application/json',
    'baton-timestamp': timestamp,
    'baton-signature': `v1=${createHmac('sha256', SECRET).update(`${timestamp}.${body}`).digest('hex')}`,
  };
}

/** A webhook agent on 127.0.0.1 with no status URL: `onPost(n)` answers its n-th POST (1-based). */
async function agentServer(onPost: (n: number, req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<string> {
  let posts = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => onPost(++posts, req, res));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

let n = 0;
async function webhookAgent(url: string): Promise<string> {
  const id = `hook${++n}`;
  // No statusUrl: only a callback can show what became of a turn.
  expect((await baton.post('/v1/agents', { id, provider: 'webhook', settings: { url, secret: SECRET } })).status).toBe(201);
  return id;
}

async function sendTo(to: string): Promise<string> {
  const res = await baton.post('/v1/handoffs', { from: 'sender', to, title: 'report back', message: 'do it and call back' });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** UNCERTAIN, and the reconciler's history scan already found nothing (incomplete: it does not count). */
async function uncertainAfterAnIncompleteScan(id: string): Promise<string> {
  const h = await waitForState(baton, id, 'UNCERTAIN');
  await eventually(
    async () => {
      const d = (await baton.get(`/v1/handoffs/${id}`)).body;
      expect(d.events.map((e: any) => e.event)).toContain('scan_missed');
    },
    { what: 'an incomplete scan', timeoutMs: 10_000 },
  );
  return h.attempts[0].requestId as string;
}

async function callback(report: Record<string, unknown>) {
  const body = JSON.stringify(report);
  const res = await baton.app.inject({ method: 'POST', url: '/v1/webhooks/callback', payload: body, headers: signed(body) });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json().outcome).toBe('recorded');
}

beforeAll(async () => {
  baton = await startTestBaton();
  expect((await baton.post('/v1/agents', { id: 'sender', provider: 'manual' })).status).toBe(201);
  const adapters = createAdapters(['webhook'], {
    demoHost: baton.host,
    turnReports: baton.repos.turnReports,
    deadlines: { webhook: { writeMs: WRITE_MS } },
  });
  worker = baton.startWorker({ adapters });
  // As start-stack.ts runs it, with a pass counter.
  reconciler = startReconciler({ ...worker.deps, locks: worker.locks }, INTERVAL_MS, 'webhook@default', () => passes++);
});

afterEach(() => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

afterAll(async () => {
  await reconciler?.stop();
  await baton?.stop();
});

describe('a webhook turn gone UNCERTAIN is settled by its signed callback (no status URL)', () => {
  it('answered too late for the write deadline, then a final "returned" callback: RETURNED within one reconcile interval', async () => {
    // The agent takes the turn but answers after Baton's write deadline: Baton cannot know it landed.
    const url = await agentServer((_n, _req, res) => {
      setTimeout(() => res.writeHead(202, { 'content-type': 'application/json' }).end('{}'), WRITE_MS * 4).unref();
    });
    const id = await sendTo(await webhookAgent(url));
    const requestId = await uncertainAfterAnIncompleteScan(id);
    const reportedAt = Date.now();
    await callback({ requestId, status: 'returned', summary: 'done after all', output: { pr: 7 } });
    const h = await waitForState(baton, id, 'RETURNED', INTERVAL_MS + MARGIN_MS);
    const settledMs = Date.now() - reportedAt;
    expect(settledMs, 'settled within one interval and the margin').toBeLessThanOrEqual(INTERVAL_MS + MARGIN_MS);
    // What was measured, for the report (not a target).
    console.info(`RETURNED ${settledMs} ms after the callback (reconcile interval ${INTERVAL_MS} ms)`);
    expect(h.resultSummary ?? h.result?.summary).toBe('done after all');
    expect(h.events.filter((e: any) => e.workTo === null).map((e: any) => e.event)).toEqual([
      'enrolled',
      'attempt_reserved',
      'reply_lost',
      'scan_missed',
      'observed_returned',
    ]);
    expect(h.attempts).toHaveLength(1);
    expect(h.attempts[0].status).toBe('returned');
  });

  it('the connection dropped after the POST was sent, then a final "failed" callback: the turn ends failed and the handoff FAILED after its resends', async () => {
    // 1st POST: read, then the connection drops (lost: UNCERTAIN). Resends: a finished turn that failed.
    const url = await agentServer((nth, req, res) => {
      if (nth === 1) return req.socket.destroy();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'failed', error: 'tests still fail' }));
    });
    const id = await sendTo(await webhookAgent(url));
    const requestId = await uncertainAfterAnIncompleteScan(id);
    const reportedAt = Date.now();
    await callback({ requestId, status: 'failed', error: 'tests failed' });
    // The reported end is taken up within one interval: the UNCERTAIN turn is found (and followed to its reported end).
    await eventually(
      async () => {
        const d = (await baton.get(`/v1/handoffs/${id}`)).body;
        expect(d.events.map((e: any) => e.event)).toContain('observed_running');
      },
      { what: 'the reported turn observed', timeoutMs: INTERVAL_MS + MARGIN_MS },
    );
    expect(Date.now() - reportedAt).toBeLessThanOrEqual(INTERVAL_MS + MARGIN_MS);
    const h = await waitForState(baton, id, 'FAILED', 15_000);
    expect(h.attempts[0].status).toBe('failed');
    expect(h.attempts[0].error ?? '').toContain('tests failed');
    expect(
      h.events
        .filter((e: any) => e.workTo === null)
        .map((e: any) => e.event)
        .slice(0, 6),
    ).toEqual(['enrolled', 'attempt_reserved', 'reply_lost', 'scan_missed', 'observed_running', 'turn_failed_resend']);
  });
});
