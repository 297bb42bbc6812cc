import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEMO_BEHAVIORS, type DemoAgentHost, type DemoBehavior, type DemoTurnStatus } from './demo-agent-host.ts';
import { DEMO_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

/**
 * Serves a DemoAgentHost over HTTP so several worker processes (and a test) share the same
 * simulated sessions. Loopback only by default. A `lose_reply` turn is accepted and then the
 * connection is destroyed without an answer, exactly like a reply lost on the network.
 *
 *   POST /sessions/:s/turns                 {turn, settings} -> ReceiveOutcome
 *   GET  /sessions/:s/turns/:rid            -> DemoObservation
 *   GET  /sessions/:s/turns/:rid/change?known=STATUS&timeoutMs=N   long poll
 *   GET  /sessions/:s/busy                  -> {busy}
 *   GET  /sessions/:s/history               -> DemoTurn[]
 *   GET  /sessions/:s/writes                -> DemoWrite[] (every write attempt, busy ones too)
 *   POST /sessions/:s/script                {behaviors}
 *   POST /sessions/:s/turns/:rid/finish     {status}
 *   GET  /stats                             -> {sessions, writesByHandoff}
 *   GET  /writes                            -> DemoWrite[] of every session
 *   POST /reset                             forget every session
 */
export async function serveDemoHost(
  host: DemoAgentHost,
  opts: { port?: number; bind?: string } = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    handle(host, req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, 500, { error: String(err) });
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.bind ?? '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const bind = opts.bind ?? '127.0.0.1';
  const shown = bind === '0.0.0.0' || bind === '::' ? '127.0.0.1' : bind;
  return {
    url: `http://${shown.includes(':') ? `[${shown}]` : shown}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        host.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
}

async function handle(host: DemoAgentHost, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://x');
  const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  const [root, session, sub, rid, action] = parts;
  if (req.method === 'POST' && root === 'reset') {
    host.reset();
    return send(res, 200, { reset: true });
  }
  if (req.method === 'GET' && root === 'stats') {
    return send(res, 200, { sessions: host.stats(), writesByHandoff: Object.fromEntries(host.writesByHandoff()) });
  }
  if (req.method === 'GET' && root === 'writes' && !session) return send(res, 200, host.writes());
  if (root !== 'sessions' || !session) return send(res, 404, { error: 'not found' });
  if (req.method === 'POST' && sub === 'turns' && !rid) {
    const body = await readJson(req);
    const outcome = await host.receiveTurn(session, body['turn'] as never, body['settings'] ?? {});
    if (outcome.status === 'accepted' && outcome.replyDelayMs) {
      await new Promise((r) => setTimeout(r, outcome.replyDelayMs));
    }
    if (outcome.status === 'accepted' && outcome.dropReply) {
      req.socket.destroy();
      return;
    }
    if (outcome.status === 'dropped') {
      req.socket.destroy();
      return;
    }
    return send(res, 200, outcome);
  }
  if (req.method === 'GET' && sub === 'turns' && rid && !action) return send(res, 200, await host.observe(session, rid));
  if (req.method === 'GET' && sub === 'turns' && rid && action === 'change') {
    const known = url.searchParams.get('known');
    const timeoutMs = Math.min(DEMO_ADAPTER_DEFAULTS.hostLongPollMaxMs, Number(url.searchParams.get('timeoutMs') ?? '0') || 0);
    return send(res, 200, await host.waitForChange(session, rid, (known || null) as DemoTurnStatus | null, timeoutMs));
  }
  if (req.method === 'POST' && sub === 'turns' && rid && action === 'finish') {
    const body = await readJson(req);
    const status = (body['status'] ?? 'returned') as 'returned' | 'failed' | 'interrupted';
    return send(res, 200, { finished: host.finish(session, rid, status) });
  }
  if (req.method === 'GET' && sub === 'busy') return send(res, 200, { busy: await host.isBusy(session) });
  if (req.method === 'GET' && sub === 'history') return send(res, 200, host.history(session));
  if (req.method === 'GET' && sub === 'writes') return send(res, 200, host.writes(session));
  if (req.method === 'POST' && sub === 'script') {
    const body = await readJson(req);
    const behaviors = Array.isArray(body['behaviors']) ? (body['behaviors'] as unknown[]) : [];
    if (!behaviors.every((b): b is DemoBehavior => (DEMO_BEHAVIORS as readonly unknown[]).includes(b))) {
      return send(res, 400, { error: `behaviors must be among ${DEMO_BEHAVIORS.join(', ')}` });
    }
    host.script(session, behaviors);
    return send(res, 200, { scripted: behaviors.length });
  }
  return send(res, 404, { error: 'not found' });
}
