import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { conformanceSuite, type ConformanceBehavior, type ConformanceHarness, type RecipientWrite } from './conformance-suite.ts';

/**
 * A real HTTP server on 127.0.0.1 speaking the documented webhook protocol: it verifies the
 * signature (the few lines libs/adapters/README.md gives a receiver), keeps a ledger of every
 * POSTed turn, follows a script per agent, and serves each turn's status at the agent's status
 * URL. Lost replies and hung writes are real: the socket is destroyed after the body was read,
 * or the answer comes long after the write's deadline.
 */
async function webhookHarness(baton: Parameters<Parameters<typeof conformanceSuite>[1]>[0]): Promise<ConformanceHarness> {
  const secret = randomBytes(24).toString('hex');
  const scripts = new Map<string, ConformanceBehavior[]>();
  const ledger = new Map<string, RecipientWrite[]>();
  const turns = new Map<string, { status: string; summary?: string; error?: string }>();
  const live = new Map<string, string>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };
  const verified = (headers: http.IncomingHttpHeaders, body: string) => {
    const timestamp = String(headers['baton-timestamp'] ?? '');
    const given = Buffer.from(String(headers['baton-signature'] ?? '').replace(/^v1=/, ''), 'hex');
    const expected = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest();
    return Math.abs(Date.now() / 1000 - Number(timestamp)) <= 300 && given.length === expected.length && timingSafeEqual(given, expected);
  };
  const end = (handle: string, requestId: string, status: 'returned' | 'failed') => {
    const turn = turns.get(requestId);
    if (!turn || turn.status === 'returned' || turn.status === 'failed') return;
    Object.assign(turn, status === 'returned' ? { status, summary: `done: ${requestId}` } : { status, error: 'the agent hit an error' });
    if (live.get(handle) === requestId) live.delete(handle);
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const answer = (status: number, json: unknown, headers: Record<string, string> = {}) =>
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(json));
      if (!verified(req.headers, raw)) return answer(401, { error: 'bad signature' });
      const [, kind, handle = '', requestId = ''] = (req.url ?? '').split('/').map(decodeURIComponent);
      if (req.method === 'GET' && kind === 'status') {
        const turn = turns.get(requestId);
        return turn ? answer(200, turn) : answer(404, { error: 'no such turn' });
      }
      if (req.method !== 'POST' || kind !== 'agents') return answer(404, { error: 'not found' });
      const turn = JSON.parse(raw) as { requestId: string; handoffId: string };
      const behavior = scripts.get(handle)?.shift() ?? 'ok';
      const write: { -readonly [K in keyof RecipientWrite]: RecipientWrite[K] } = {
        requestId: turn.requestId,
        handoffId: turn.handoffId,
        at: Date.now(),
        liveTurn: live.get(handle) ?? null,
        answer: 'accepted',
      };
      ledger.get(handle)?.push(write);
      if (behavior === 'busy') {
        write.answer = 'busy';
        return answer(429, { error: 'busy' }, { 'retry-after': '0' });
      }
      if (behavior === 'refuse') {
        write.answer = 'refused';
        return answer(403, { error: 'not for me' });
      }
      // The turn is taken: it runs whatever becomes of the answer.
      turns.set(turn.requestId, { status: 'running' });
      live.set(handle, turn.requestId);
      if (behavior !== 'slow') later(60, () => end(handle, turn.requestId, behavior === 'fail' ? 'failed' : 'returned'));
      if (behavior === 'lose_reply') return req.socket.destroy();
      if (behavior === 'hang_write') return later(5_000, () => answer(202, { status: 'running' }));
      return answer(202, { status: 'running' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    provider: 'webhook',
    adapters: (deadlines) =>
      createAdapters(['webhook'], { demoHost: undefined, turnReports: baton.repos.turnReports, deadlines: { webhook: deadlines } }),
    async agent(handle, script) {
      scripts.set(handle, [...script]);
      ledger.set(handle, []);
      return {
        settings: {
          url: `http://127.0.0.1:${port}/agents/${handle}`,
          secret,
          statusUrl: `http://127.0.0.1:${port}/status/${handle}/{requestId}`,
        },
      };
    },
    async writes(handle) {
      return [...(ledger.get(handle) ?? [])];
    },
    async finish(handle) {
      const requestId = live.get(handle);
      if (requestId) end(handle, requestId, 'returned');
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

conformanceSuite('webhook (a real HTTP server on 127.0.0.1)', webhookHarness);
