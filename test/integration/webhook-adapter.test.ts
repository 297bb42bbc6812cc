import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import type { DeliveryTarget, ProviderAdapter, TurnRequest } from '../../libs/adapters/provider-adapter.ts';
import { createWebhookAdapter } from '../../libs/adapters/webhook/create-webhook-adapter.ts';
import type { TurnReport } from '../../libs/domain/turn-report.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

const SECRET = 'a-webhook-secret-of-32-characters';

/**
 * The receiver's side of the signature, exactly the few lines libs/adapters/README.md and
 * examples/webhook-agent give (no Baton code): HMAC-SHA256 of `${timestamp}.${rawBody}`.
 */
function receiverVerifies(headers: IncomingHttpHeaders, rawBody: string, secret = SECRET): boolean {
  const timestamp = String(headers['baton-timestamp']);
  const given = Buffer.from(String(headers['baton-signature'] ?? '').replace(/^v1=/, ''), 'hex');
  const expected = createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest();
  const fresh = Math.abs(Date.now() / 1000 - Number(timestamp)) <= 300;
  return fresh && given.length === expected.length && timingSafeEqual(given, expected);
}

function signedBy(secret: string, body: string, timestampS = Math.floor(Date.now() / 1000)): Record<string, string> {
  const timestamp = String(timestampS);
  return {
    'content-type': 'application/json',
    'baton-timestamp': timestamp,
    'baton-signature': `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`,
  };
}

interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** When it arrived (ms since the epoch). */
  readonly at: number;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

/** A real HTTP server on 127.0.0.1 standing in for the agent; records every request it read. */
async function agentServer(handler: Handler): Promise<{ url: string; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, at: Date.now() });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  servers.push(server);
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const servers: http.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));

let n = 0;
function turn(): TurnRequest {
  n++;
  return {
    requestId: `0190f7c4-0000-7000-8000-${String(n).padStart(12, '0')}`,
    handoffId: `0190f7c4-1111-7000-8000-${String(n).padStart(12, '0')}`,
    attempt: 1,
    from: 'planner',
    title: 'Login form',
    message: 'Add a login form',
    focus: null,
    doneWhen: 'the form submits',
    context: { summary: 'auth work', openQuestions: [], nextSteps: ['write tests'] },
    packet: '<<context>>',
  };
}

function target(settings: Record<string, unknown>): DeliveryTarget {
  return { agentId: 'agent-id', handle: 'hook', target: null, settings: { secret: SECRET, ...settings } };
}

const reports = new Map<string, TurnReport>();
const adapter: ProviderAdapter = createWebhookAdapter({
  reports: { find: async (id) => reports.get(id) ?? null },
  pollMs: 20,
  callbackUrl: 'http://baton.invalid/v1/webhooks/callback',
});
const never = () => new AbortController().signal;

describe('webhook adapter: the write', () => {
  it('POSTs the turn as JSON with Idempotency-Key = request id and a signature the receiver verifies in a few lines', async () => {
    const agent = await agentServer((_req, res) => json(res, 200, { summary: 'done' }));
    const t = turn();
    await adapter.sendTurn(target({ url: `${agent.url}/turns` }), t, never());
    const [got] = agent.received;
    expect(got?.method).toBe('POST');
    expect(got?.url).toBe('/turns');
    expect(got?.headers['idempotency-key']).toBe(t.requestId);
    expect(got?.headers['content-type']).toBe('application/json');
    expect(receiverVerifies(got!.headers, got!.body), 'signature checks out with the agent secret').toBe(true);
    expect(receiverVerifies(got!.headers, got!.body, 'another-secret-of-enough-length'), 'and not with another secret').toBe(false);
    expect(JSON.parse(got!.body)).toEqual({
      requestId: t.requestId,
      handoffId: t.handoffId,
      attempt: 1,
      from: 'planner',
      title: 'Login form',
      message: 'Add a login form',
      focus: null,
      doneWhen: 'the form submits',
      context: t.context,
      packet: '<<context>>',
      session: null,
      callbackUrl: 'http://baton.invalid/v1/webhooks/callback',
    });
  });

  it('200 with a result body is a finished turn: accepted, seen returned with summary and output', async () => {
    const agent = await agentServer((_req, res) => json(res, 200, { summary: 'form added', output: { files: ['login.tsx'] } }));
    const sent = await adapter.sendTurn(target({ url: agent.url }), turn(), never());
    expect(sent).toEqual({
      outcome: 'accepted',
      seen: { found: true, status: 'returned', result: { summary: 'form added', output: { files: ['login.tsx'] } } },
    });
  });

  it.each([409, 423, 429])('%i is busy (nothing done) and carries Retry-After in seconds', async (status) => {
    const agent = await agentServer((_req, res) => json(res, status, { error: 'in a turn' }, { 'retry-after': '7' }));
    const sent = await adapter.sendTurn(target({ url: agent.url }), turn(), never());
    expect(sent.outcome).toBe('busy');
    expect(sent).toMatchObject({ retryAfterMs: 7_000 });
    expect(sent.outcome === 'busy' && sent.detail).toContain(String(status));
  });

  it('a busy answer with Retry-After as an HTTP date is honoured too', async () => {
    const at = new Date(Date.now() + 60_000).toUTCString();
    const agent = await agentServer((_req, res) => json(res, 429, {}, { 'retry-after': at }));
    const sent = await adapter.sendTurn(target({ url: agent.url }), turn(), never());
    expect(sent.outcome).toBe('busy');
    const wait = sent.outcome === 'busy' ? (sent.retryAfterMs ?? 0) : 0;
    expect(wait).toBeGreaterThan(55_000);
    expect(wait).toBeLessThanOrEqual(60_000);
  });

  it.each([400, 403, 404])('%i is a refusal', async (status) => {
    const agent = await agentServer((_req, res) => json(res, status, { error: 'not for me' }));
    const sent = await adapter.sendTurn(target({ url: agent.url }), turn(), never());
    expect(sent.outcome).toBe('rejected');
    expect(sent.outcome === 'rejected' && sent.reason).toContain(String(status));
  });

  it('a redirect is not followed: 3xx is a refusal and the Location is never requested', async () => {
    const elsewhere = await agentServer((_req, res) => json(res, 200, { summary: 'should never run' }));
    const agent = await agentServer((_req, res) => res.writeHead(307, { location: `${elsewhere.url}/turns` }).end());
    const sent = await adapter.sendTurn(target({ url: agent.url }), turn(), never());
    expect(sent.outcome).toBe('rejected');
    expect(sent.outcome === 'rejected' && sent.reason).toContain('307');
    expect(elsewhere.received).toHaveLength(0);
  });

  it('connection refused before sending is not_sent', async () => {
    const agent = await agentServer(() => undefined);
    await agent.close();
    const sent = await adapter.sendTurn(target({ url: agent.url }), turn(), never());
    expect(sent.outcome).toBe('not_sent');
    expect(sent.outcome === 'not_sent' && sent.error).toContain('ECONNREFUSED');
  });

  it('a server that reads the body and then drops the connection leaves the write lost', async () => {
    const agent = await agentServer((req) => req.socket.destroy());
    const sent = await adapter.sendTurn(target({ url: agent.url }), turn(), never());
    expect(agent.received).toHaveLength(1);
    expect(sent.outcome).toBe('lost');
  });

  it('a server that hangs past the deadline (the abort signal) leaves the write lost', async () => {
    const agent = await agentServer(() => undefined);
    const deadline = AbortSignal.timeout(300);
    const sent = await adapter.sendTurn(target({ url: agent.url }), turn(), deadline);
    expect(agent.received).toHaveLength(1);
    expect(sent.outcome).toBe('lost');
  });

  it('the timeoutMs setting bounds a hanging write too (lost)', async () => {
    const agent = await agentServer(() => undefined);
    const sent = await adapter.sendTurn(target({ url: agent.url, timeoutMs: 200 }), turn(), never());
    expect(sent.outcome).toBe('lost');
  });

  it('5xx is lost, and observation through the status URL settles it', async () => {
    const t = turn();
    const agent = await agentServer((req, res) => {
      if (req.method === 'POST') return json(res, 502, { error: 'gateway' });
      return json(res, 200, { status: 'returned', summary: 'it ran after all' });
    });
    const settings = target({ url: `${agent.url}/turns`, statusUrl: `${agent.url}/turns/{requestId}` });
    expect((await adapter.sendTurn(settings, t, never())).outcome).toBe('lost');
    const seen = await adapter.observeTurn(settings, t.requestId, never());
    expect(seen).toEqual({ found: true, status: 'returned', result: { summary: 'it ran after all' } });
    const get = agent.received.find((r) => r.method === 'GET');
    expect(get?.url).toBe(`/turns/${t.requestId}`);
    expect(receiverVerifies(get!.headers, ''), 'status requests are signed over an empty body').toBe(true);
  });
});

describe('webhook adapter: observing a turn', () => {
  it('202 then polling the status URL the 202 named: onRunning once, then the result', async () => {
    const t = turn();
    let looks = 0;
    const agent = await agentServer((req, res) => {
      if (req.method === 'POST') return json(res, 202, {}, { location: `/status/${t.requestId}` });
      looks++;
      if (looks < 3) return json(res, 200, { status: 'running' });
      return json(res, 200, { status: 'returned', summary: 'polled result', output: { n: 1 } });
    });
    // No statusUrl setting: only the 202's Location names where to look.
    const settings = target({ url: `${agent.url}/turns` });
    const sent = await adapter.sendTurn(settings, t, never());
    expect(sent).toEqual({ outcome: 'accepted', seen: { found: true, status: 'accepted' } });
    let running = 0;
    const end = await adapter.waitForTurn(settings, t.requestId, { onRunning: async () => void running++ }, never());
    expect(end).toEqual({ status: 'returned', result: { summary: 'polled result', output: { n: 1 } } });
    expect(running).toBe(1);
    expect(agent.received.filter((r) => r.method === 'GET').every((r) => r.url === `/status/${t.requestId}`)).toBe(true);
  });

  it('a 202 naming a status URL on another origin is ignored: signed requests go only to the agent', async () => {
    const t = turn();
    const other = await agentServer((_req, res) => json(res, 200, { status: 'returned', summary: 'foreign' }));
    const agent = await agentServer((_req, res) => json(res, 202, { statusUrl: `${other.url}/status` }));
    const settings = target({ url: agent.url });
    await adapter.sendTurn(settings, t, never());
    expect(await adapter.observeTurn(settings, t.requestId, never())).toEqual({ found: false, complete: false });
    expect(other.received).toHaveLength(0);
  });

  it('a status URL that answers 404 proves absence (complete scan); without a status URL absence proves nothing', async () => {
    const agent = await agentServer((_req, res) => json(res, 404, { error: 'unknown request id' }));
    const t = turn();
    expect(
      await adapter.observeTurn(target({ url: agent.url, statusUrl: `${agent.url}/turns/{requestId}` }), t.requestId, never()),
    ).toEqual({ found: false, complete: true });
    expect(await adapter.observeTurn(target({ url: agent.url }), t.requestId, never())).toEqual({ found: false, complete: false });
  });

  it('a status URL that cannot be asked (5xx) makes observeTurn throw: "could not ask", not absence', async () => {
    const agent = await agentServer((_req, res) => json(res, 503, {}));
    await expect(
      adapter.observeTurn(target({ url: agent.url, statusUrl: `${agent.url}/s/{requestId}` }), turn().requestId, never()),
    ).rejects.toThrow(/503/);
  });

  it('a stored callback report is the observation, before any status URL', async () => {
    const t = turn();
    reports.set(t.requestId, {
      requestId: t.requestId,
      status: 'failed',
      summary: null,
      output: null,
      error: 'tests failed',
      usage: null,
      receivedAt: new Date(),
    });
    const agent = await agentServer((_req, res) => json(res, 500, {}));
    const settings = target({ url: agent.url, statusUrl: `${agent.url}/s/{requestId}` });
    expect(await adapter.observeTurn(settings, t.requestId, never())).toEqual({ found: true, status: 'failed', error: 'tests failed' });
    expect(await adapter.waitForTurn(settings, t.requestId, { onRunning: async () => undefined }, never())).toEqual({
      status: 'failed',
      error: 'tests failed',
    });
    expect(agent.received).toHaveLength(0);
  });

  it('busy and rejected reported after the write end the turn as busy / rejected', async () => {
    const [a, b] = [turn(), turn()];
    reports.set(a.requestId, {
      requestId: a.requestId,
      status: 'busy',
      summary: null,
      output: null,
      error: 'still on the last task',
      usage: null,
      receivedAt: new Date(),
    });
    reports.set(b.requestId, {
      requestId: b.requestId,
      status: 'rejected',
      summary: null,
      output: null,
      error: 'not my repo',
      usage: null,
      receivedAt: new Date(),
    });
    const settings = target({ url: 'http://127.0.0.1:9' });
    const hooks = { onRunning: async () => undefined };
    expect(await adapter.waitForTurn(settings, a.requestId, hooks, never())).toEqual({ status: 'busy', detail: 'still on the last task' });
    expect(await adapter.waitForTurn(settings, b.requestId, hooks, never())).toEqual({ status: 'rejected', reason: 'not my repo' });
  });

  it("waitForTurn rejects with the signal's reason when aborted, the turn left running", async () => {
    const agent = await agentServer((_req, res) => json(res, 200, { status: 'running' }));
    const controller = new AbortController();
    const settings = target({ url: agent.url, statusUrl: `${agent.url}/s/{requestId}` });
    const watching = adapter.waitForTurn(
      settings,
      turn().requestId,
      { onRunning: async () => controller.abort(new Error('shutting down')) },
      controller.signal,
    );
    await expect(watching).rejects.toThrow('shutting down');
  });

  it('isBusy asks the busyUrl when the settings name one, else answers false', async () => {
    const agent = await agentServer((_req, res) => json(res, 200, { busy: true }));
    expect(await adapter.isBusy(target({ url: agent.url, busyUrl: `${agent.url}/busy` }), never())).toBe(true);
    expect(receiverVerifies(agent.received[0]!.headers, '')).toBe(true);
    expect(await adapter.isBusy(target({ url: agent.url }), never())).toBe(false);
    expect(adapter.reportsBusyOnSend).toBe(true);
  });
});

describe('webhook agents through Baton: registration, the callback route, a real delivery', () => {
  let baton: TestBaton;
  let apiUrl: string;
  let example: ChildProcess | undefined;

  beforeAll(async () => {
    baton = await startTestBaton();
    apiUrl = await baton.listen();
    expect((await baton.post('/v1/agents', { id: 'sender', provider: 'manual' })).status).toBe(201);
  });

  afterAll(async () => {
    example?.kill('SIGKILL');
    await baton?.stop();
  });

  it('refuses bad settings with invalid_settings and never shows the secret', async () => {
    const bad: Array<[string, Record<string, unknown>]> = [
      ['unknown key', { url: 'http://127.0.0.1:1/turns', secret: SECRET, colour: 'blue' }],
      ['not http', { url: 'ftp://127.0.0.1/turns', secret: SECRET }],
      ['not a URL', { url: 'turns', secret: SECRET }],
      ['no url', { secret: SECRET }],
      ['short secret', { url: 'http://127.0.0.1:1/turns', secret: 'short' }],
      ['status URL without {requestId}', { url: 'http://127.0.0.1:1/turns', secret: SECRET, statusUrl: 'http://127.0.0.1:1/status' }],
      ['a header Baton sets', { url: 'http://127.0.0.1:1/turns', secret: SECRET, headers: { 'Idempotency-Key': 'x' } }],
      ['credentials in the URL', { url: 'http://user:pw@127.0.0.1:1/turns', secret: SECRET }],
    ];
    for (const [what, settings] of bad) {
      const res = await baton.post('/v1/agents', { id: 'bad-hook', provider: 'webhook', settings });
      expect(res.status, what).toBe(400);
      expect(res.body.error.code, what).toBe('invalid_settings');
    }
    const ok = await baton.post('/v1/agents', {
      id: 'good-hook',
      provider: 'webhook',
      settings: { url: 'https://agent.example/turns', secret: SECRET, headers: { 'X-Team': 'a' } },
    });
    expect(ok.status).toBe(201);
    expect(JSON.stringify(ok.body)).not.toContain(SECRET);
    expect(ok.body.settings.secret).toBe('[redacted]');
    const read = await baton.get('/v1/agents/good-hook');
    expect(JSON.stringify(read.body)).not.toContain(SECRET);
  });

  it('delivers to the example agent: 202, signed callbacks through the API route, RETURNED', async () => {
    example = spawn(process.execPath, ['examples/webhook-agent/server.mjs'], {
      env: { ...process.env, PORT: '0', BATON_WEBHOOK_SECRET: SECRET, WORK_MS: '200' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const agentUrl = await new Promise<string>((resolve, reject) => {
      example!.stdout!.on('data', (chunk: Buffer) => {
        const m = /listening on (\S+)/.exec(chunk.toString());
        if (m) resolve(m[1]!);
      });
      example!.once('exit', (code) => reject(new Error(`example agent exited (${code})`)));
    });
    expect(
      (await baton.post('/v1/agents', { id: 'example', provider: 'webhook', settings: { url: agentUrl, secret: SECRET } })).status,
    ).toBe(201);
    const adapters = createAdapters(['webhook'], {
      demoHost: baton.host,
      turnReports: baton.repos.turnReports,
      webhookCallbackUrl: `${apiUrl}/v1/webhooks/callback`,
    });
    const worker = baton.startWorker({ adapters });
    try {
      const sent = await baton.post('/v1/handoffs', { from: 'sender', to: 'example', title: 'Login form', message: 'Add a login form' });
      expect(sent.status).toBe(201);
      const h = await waitForState(baton, sent.body.id, 'RETURNED', 15_000);
      expect(h.resultSummary ?? h.result?.summary).toBe('done: Login form');
      expect(h.events.map((e: any) => e.to)).toEqual(expect.arrayContaining(['SENDING', 'ACCEPTED', 'RUNNING', 'RETURNED']));
      const requestId = h.attempts[0].requestId as string;
      const stored = await baton.repos.turnReports.find(requestId);
      expect(stored).toMatchObject({ status: 'returned', summary: 'done: Login form', output: { handoffId: sent.body.id } });
    } finally {
      await worker.stop();
    }
  });

  it("honours the agent's Retry-After: a busy webhook is asked again no sooner than it said", async () => {
    let calls = 0;
    const agent = await agentServer((_req, res) => {
      calls++;
      if (calls === 1) return json(res, 429, { error: 'busy' }, { 'retry-after': '2' });
      return json(res, 200, { summary: 'done after the wait' });
    });
    expect(
      (await baton.post('/v1/agents', { id: 'patient', provider: 'webhook', settings: { url: agent.url, secret: SECRET } })).status,
    ).toBe(201);
    const worker = baton.startWorker({
      adapters: createAdapters(['webhook'], { demoHost: baton.host, turnReports: baton.repos.turnReports }),
    });
    try {
      const sent = await baton.post('/v1/handoffs', { from: 'sender', to: 'patient', title: 'wait', message: 'come back later' });
      const h = await waitForState(baton, sent.body.id, 'RETURNED', 15_000);
      expect(agent.received).toHaveLength(2);
      expect(agent.received[1]!.at - agent.received[0]!.at).toBeGreaterThanOrEqual(1_900);
      expect(h.attempts.map((a: any) => a.status)).toEqual(['busy', 'returned']);
    } finally {
      await worker.stop();
      await agent.close();
    }
  });

  it("records the turn's usage a webhook agent reports: with its answer to the write, or with its signed callback (checked: 400 validation_failed)", async () => {
    const used = { model: 'hook-model-1', inputTokens: 1200, outputTokens: 34, cacheReadTokens: 500, costUsd: 0.0123 };
    const agent = await agentServer((_req, res, body) => {
      const turnBody = JSON.parse(body) as { message?: string };
      if (turnBody.message?.includes('answer now'))
        return json(res, 200, { summary: 'answered', usage: { ...used, cacheWriteTokens: 'lots' } });
      return json(res, 202, {});
    });
    expect(
      (await baton.post('/v1/agents', { id: 'metered', provider: 'webhook', settings: { url: agent.url, secret: SECRET } })).status,
    ).toBe(201);
    const worker = baton.startWorker({
      adapters: createAdapters(['webhook'], { demoHost: baton.host, turnReports: baton.repos.turnReports }),
    });
    try {
      // In the answer: the usable parts are kept (an unusable count is left out).
      const now = await baton.post('/v1/handoffs', { from: 'sender', to: 'metered', message: 'answer now' });
      await waitForState(baton, now.body.id, 'RETURNED', 15_000);
      const answered = (await baton.get(`/v1/handoffs/${now.body.id as string}`)).body.usage;
      expect(answered.attempts[0]).toMatchObject(used);
      expect(answered.attempts[0].cacheWriteTokens ?? null).toBeNull();

      // In the signed callback: checked, then stored with the report and the attempt.
      const later = await baton.post('/v1/handoffs', { from: 'sender', to: 'metered', message: 'report later' });
      await waitForState(baton, later.body.id, 'ACCEPTED', 15_000);
      const requestId = (await baton.get(`/v1/handoffs/${later.body.id as string}`)).body.attempts[0].requestId as string;
      const post = (body: string) =>
        baton.app.inject({ method: 'POST', url: '/v1/webhooks/callback', payload: body, headers: signedBy(SECRET, body) });
      for (const usage of [{ inputTokens: -1 }, { tokens: 5 }, { costUsd: 'free' }, 'all of it']) {
        const bad = await post(JSON.stringify({ requestId, status: 'returned', summary: 'done', usage }));
        expect(bad.statusCode, JSON.stringify(usage)).toBe(400);
        expect(bad.json().error.code).toBe('validation_failed');
        expect(bad.json().error.message).toMatch(/^usage/);
      }
      const reported = { ...used, cacheWriteTokens: 7 };
      const ok = await post(JSON.stringify({ requestId, status: 'returned', summary: 'done', usage: reported }));
      expect(ok.statusCode, ok.body).toBe(200);
      await waitForState(baton, later.body.id, 'RETURNED', 15_000);
      const recorded = (await baton.get(`/v1/handoffs/${later.body.id as string}`)).body.usage;
      expect(recorded.attempts[0]).toMatchObject(reported);
      expect((await baton.repos.turnReports.find(requestId))?.usage).toEqual(reported);
    } finally {
      await worker.stop();
      await agent.close();
    }
  });

  describe('the callback route', () => {
    let requestId: string;
    const callback = (body: string, headers: Record<string, string>) =>
      baton.app.inject({ method: 'POST', url: '/v1/webhooks/callback', payload: body, headers });

    beforeAll(async () => {
      expect(
        (await baton.post('/v1/agents', { id: 'hook', provider: 'webhook', settings: { url: 'http://127.0.0.1:9/turns', secret: SECRET } }))
          .status,
      ).toBe(201);
      const sent = await baton.post('/v1/handoffs', { from: 'sender', to: 'hook', message: 'report back' });
      // The attempt a worker would have reserved before its write (the route only needs the request id).
      const handoffId = sent.body.id as string;
      requestId = '0190f7c4-2222-7000-8000-000000000001';
      await baton.db.pool.query(
        `INSERT INTO delivery_attempts (id, handoff_id, number, request_id, status, started_at) VALUES ('0190f7c4-3333-7000-8000-000000000001', $1, 1, $2, 'accepted', now())`,
        [handoffId, requestId],
      );
    });

    it('needs no bearer token: the signature is the credential', async () => {
      const body = JSON.stringify({ requestId, status: 'running' });
      const res = await callback(body, signedBy(SECRET, body));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ requestId, status: 'running', outcome: 'recorded' });
    });

    it('refuses a bad signature (401 invalid_signature) and stores nothing', async () => {
      const body = JSON.stringify({ requestId, status: 'returned', summary: 'forged' });
      for (const headers of [
        signedBy('not-the-agent-secret-at-all', body),
        { 'content-type': 'application/json' },
        { ...signedBy(SECRET, body), 'baton-signature': 'v1=00' },
      ]) {
        const res = await callback(body, headers);
        expect(res.statusCode).toBe(401);
        expect(res.json().error.code).toBe('invalid_signature');
      }
      // Signed for another body: the signature covers the exact bytes.
      const other = JSON.stringify({ requestId, status: 'returned', summary: 'other' });
      const res = await callback(body, signedBy(SECRET, other));
      expect(res.json().error.code).toBe('invalid_signature');
      expect((await baton.repos.turnReports.find(requestId))?.status).toBe('running');
    });

    it('refuses a timestamp more than 5 minutes old or ahead (401 stale_timestamp)', async () => {
      const body = JSON.stringify({ requestId, status: 'returned', summary: 'late' });
      // 330 s, not 301: the server reads its clock after the test does (a loaded CI run took
      // long enough between the two for a timestamp 301 s ahead to be 300 s ahead on arrival).
      for (const offset of [-330, 330]) {
        const res = await callback(body, signedBy(SECRET, body, Math.floor(Date.now() / 1000) + offset));
        expect(res.statusCode).toBe(401);
        expect(res.json().error.code).toBe('stale_timestamp');
      }
      expect((await baton.repos.turnReports.find(requestId))?.status).toBe('running');
    });

    it('stores the final report once; the same body again is 200 (idempotent), another is 409 replay_conflict', async () => {
      const body = JSON.stringify({ requestId, status: 'returned', summary: 'all done', output: { pr: 42 } });
      const first = await callback(body, signedBy(SECRET, body));
      expect(first.statusCode).toBe(200);
      expect(first.json().outcome).toBe('recorded');
      // The same report, key order changed and signed again later: still the same report.
      const again = JSON.stringify({ output: { pr: 42 }, summary: 'all done', status: 'returned', requestId });
      const repeat = await callback(again, signedBy(SECRET, again));
      expect(repeat.statusCode).toBe(200);
      expect(repeat.json().outcome).toBe('repeated');
      const different = JSON.stringify({ requestId, status: 'failed', error: 'changed my mind' });
      const replay = await callback(different, signedBy(SECRET, different));
      expect(replay.statusCode).toBe(409);
      expect(replay.json().error.code).toBe('replay_conflict');
      // A late "running" after the end changes nothing.
      const late = JSON.stringify({ requestId, status: 'running' });
      expect((await callback(late, signedBy(SECRET, late))).json()).toEqual({ requestId, status: 'returned', outcome: 'stale' });
      expect(await baton.repos.turnReports.find(requestId)).toMatchObject({
        status: 'returned',
        summary: 'all done',
        output: { pr: 42 },
        error: null,
      });
    });

    it('answers 404 turn_not_found for a request id no webhook turn has', async () => {
      const body = JSON.stringify({ requestId: '0190f7c4-9999-7000-8000-000000000009', status: 'running' });
      const res = await callback(body, signedBy(SECRET, body));
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('turn_not_found');
    });

    it('refuses a body outside the schema (unknown status, unknown key)', async () => {
      for (const body of [JSON.stringify({ requestId, status: 'done' }), JSON.stringify({ requestId, status: 'running', extra: 1 })]) {
        const res = await callback(body, signedBy(SECRET, body));
        expect(res.statusCode).toBe(400);
      }
    });

    it('a report that arrived by callback is what the adapter observes', async () => {
      const hookAdapter = createWebhookAdapter({ reports: baton.repos.turnReports });
      const seen = await hookAdapter.observeTurn(target({ url: 'http://127.0.0.1:9/turns' }), requestId, never());
      expect(seen).toEqual({ found: true, status: 'returned', result: { summary: 'all done', output: { pr: 42 } } });
    });
  });
});
