import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient, DEFAULT_CLIENT_TIMEOUT_MS } from '../../libs/api-client/api-client.ts';
import { followEvents } from '../../services/cli/follow-events.ts';
import { runCli } from '../../services/cli/program.ts';
import { loadConfig } from '../../libs/config/load-config.ts';
import { scratchDir } from '../support/scratch-dir.ts';

/**
 * Every call of the CLI (and `baton mcp`, which uses the same client) is bounded: a stalled API,
 * a half-open socket or a proxy that drops the answer ends the command with a clear error, and an
 * event stream that goes silent is reopened, without a listener left behind per reconnect.
 * Servers here are plain sockets on loopback that misbehave on purpose.
 */
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

/** A server that accepts connections, reads the request and never answers. */
async function silentServer(): Promise<string> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('data', () => undefined);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function httpServer(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('bounded client calls', () => {
  it(`documents a default of ${DEFAULT_CLIENT_TIMEOUT_MS} ms, which BATON_CLIENT_TIMEOUT_MS overrides`, () => {
    expect(loadConfig({}).clientTimeoutMs).toBe(DEFAULT_CLIENT_TIMEOUT_MS);
    expect(loadConfig({ BATON_CLIENT_TIMEOUT_MS: '2500' }).clientTimeoutMs).toBe(2_500);
    expect(() => loadConfig({ BATON_CLIENT_TIMEOUT_MS: '0' })).toThrow(/BATON_CLIENT_TIMEOUT_MS/);
  });

  it('`baton status` against an API that never answers ends within its timeout, saying so', async () => {
    const url = await silentServer();
    let out = '';
    let err = '';
    const t0 = Date.now();
    const code = await runCli(
      ['status'],
      { BATON_URL: url, BATON_TOKEN: `baton_${'x'.repeat(43)}`, BATON_CLIENT_TIMEOUT_MS: '500', BATON_HOME: scratchDir('baton-timeout-') },
      { out: (s) => void (out += s), err: (s) => void (err += s) },
    );
    const took = Date.now() - t0;
    expect(code).not.toBe(0);
    expect(took, 'bounded by the timeout (plus the CLI itself), not by the server').toBeLessThan(500 + 5_000);
    expect(err).toContain('gave no answer within 500 ms (BATON_CLIENT_TIMEOUT_MS)');
    expect(out).toBe('');
  });

  it('an event stream whose headers never come is given up at the timeout', async () => {
    const url = await silentServer();
    const client = new ApiClient(url, undefined, undefined, undefined, undefined, 300);
    const t0 = Date.now();
    await expect(client.openStream('/v1/events', {}, new AbortController().signal)).rejects.toThrow(/gave no answer within 300 ms/);
    expect(Date.now() - t0).toBeLessThan(300 + 5_000);
  });
});

describe('following events', () => {
  it('reopens a stream that went silent (no heartbeat within idleMs), resuming from the last id', async () => {
    const lastIds: Array<string | undefined> = [];
    const url = await httpServer((req, res) => {
      lastIds.push(req.headers['last-event-id'] as string | undefined);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // One event, then silence: a half-open socket or a proxy that stopped passing bytes.
      res.write('retry: 2000\nid: 7\n\nid: 8\nevent: delivery\ndata: {"id":"8","handoffId":"h","event":"enrolled","to":"WAITING"}\n\n');
    });
    const controller = new AbortController();
    const reasons: string[] = [];
    await followEvents(new ApiClient(url, undefined, 'tok'), {
      signal: controller.signal,
      idleMs: 300,
      reconnectMs: 10,
      onEvent: () => undefined,
      onReconnect: (reason) => {
        reasons.push(reason);
        if (reasons.length === 2) controller.abort();
      },
    });
    expect(reasons[0]).toMatch(/the stream went silent \(nothing arrived for 300 ms\)/);
    expect(lastIds.slice(0, 2)).toEqual([undefined, '8']);
  });

  it("leaves no listener on the caller's signal across reconnects", async () => {
    const url = await httpServer((_req, res) => {
      res
        .writeHead(503, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { code: 'database_unavailable', message: 'down' } }));
    });
    const controller = new AbortController();
    let reconnects = 0;
    const counts: number[] = [];
    await followEvents(new ApiClient(url, undefined, 'tok'), {
      signal: controller.signal,
      reconnectMs: 5,
      onEvent: () => undefined,
      onReconnect: () => {
        counts.push(getEventListeners(controller.signal, 'abort').length);
        if (++reconnects === 20) controller.abort();
      },
    });
    expect(reconnects).toBe(20);
    // Between connections nothing of the earlier ones is left on the signal.
    expect(Math.max(...counts)).toBe(0);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});
