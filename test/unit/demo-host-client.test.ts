import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createDemoAdapter } from '../../libs/adapters/demo/create-demo-adapter.ts';
import { DemoAgentHost } from '../../libs/adapters/demo/demo-agent-host.ts';
import { DemoHostClient, DemoHostUnreachable, DemoReplyLost } from '../../libs/adapters/demo/demo-host-client.ts';
import { serveDemoHost } from '../../libs/adapters/demo/demo-host-server.ts';
import type { DeliveryTarget, TurnRequest } from '../../libs/adapters/provider-adapter.ts';

/**
 * The demo host's HTTP client tells a write that never reached the host (nothing was written:
 * Baton may send it again) from one whose answer was lost after the request went out (it may
 * have landed: UNCERTAIN, never resent).
 */

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** A server on a free port answering with `handle`; its URL. */
async function serve(handle: http.RequestListener): Promise<string> {
  const server = http.createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  closers.push(() => server.closeAllConnections());
  return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

function client(url: string): DemoHostClient {
  const c = new DemoHostClient(url);
  closers.push(() => c.close());
  return c;
}

const turn = { requestId: 'r1', handoffId: 'h1', from: 'boss', title: null, message: 'hi' };
const request = {
  ...turn,
  attempt: 1,
  focus: null,
  doneWhen: null,
  context: { summary: null, openQuestions: [], nextSteps: [] },
} as unknown as TurnRequest;
const target: DeliveryTarget = { agentId: 'a1', handle: 'a', target: 's1', settings: {} };

describe('demo host client', () => {
  it('says unreachable when nothing listens (nothing was written): the adapter answers not_sent', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    await expect(client(url).receiveTurn('s1', turn, {})).rejects.toBeInstanceOf(DemoHostUnreachable);
    const adapter = createDemoAdapter(client(url));
    expect(await adapter.sendTurn(target, request, new AbortController().signal)).toMatchObject({ outcome: 'not_sent' });
  });

  it('says the reply was lost when the host read the request and dropped the connection: the adapter answers lost', async () => {
    let read = 0;
    const url = await serve((req, res) => {
      req.resume();
      req.on('end', () => {
        read++;
        res.socket?.destroy();
      });
    });
    await expect(client(url).receiveTurn('s1', turn, {})).rejects.toBeInstanceOf(DemoReplyLost);
    const adapter = createDemoAdapter(client(url));
    expect(await adapter.sendTurn(target, request, new AbortController().signal)).toMatchObject({ outcome: 'lost' });
    expect(read).toBe(2);
  });

  it('says the reply was lost when the answer is not JSON', async () => {
    const url = await serve((req, res) => {
      req.resume();
      res.end('{"status": "accep');
    });
    await expect(client(url).receiveTurn('s1', turn, {})).rejects.toBeInstanceOf(DemoReplyLost);
  });

  it('sends the body and reads the answer of a host that works', async () => {
    const url = await serve((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ status: 'busy', echo: { method: req.method, url: req.url, requestId: body.turn.requestId } }));
      });
    });
    expect(await client(url).receiveTurn('s 1', turn, {})).toEqual({
      status: 'busy',
      echo: { method: 'POST', url: '/sessions/s%201/turns', requestId: 'r1' },
    });
  });
});

describe('demo host client under many followed turns', () => {
  it("writes a new turn at once while more long polls are open than the calls' pool has connections", async () => {
    const host = new DemoAgentHost();
    const served = await serveDemoHost(host);
    closers.push(() => served.close());
    const c = new DemoHostClient(served.url, 4);
    closers.push(() => c.close());
    // Eight hanging turns, each followed by a long poll of 4 s: twice the calls' connections.
    for (let i = 0; i < 8; i++) await c.receiveTurn(`s${i}`, { ...turn, requestId: `r${i}`, handoffId: `h${i}` }, { behavior: 'hang' });
    let pollsEnded = 0;
    const polls = Array.from({ length: 8 }, (_, i) => c.waitForChange(`s${i}`, `r${i}`, 'running', 4_000).finally(() => pollsEnded++));
    const started = performance.now();
    expect(await c.receiveTurn('fresh', { ...turn, requestId: 'r-new', handoffId: 'h-new' }, { behavior: 'hang' })).toMatchObject({
      status: 'accepted',
    });
    expect(await c.observe('fresh', 'r-new')).toMatchObject({ found: true });
    // With the long polls in the calls' pool, the write waited for one of them to end (4 s).
    expect(performance.now() - started).toBeLessThan(2_000);
    // The long polls are all still open: none of them ending was what made room.
    expect(pollsEnded).toBe(0);
    for (let i = 0; i < 8; i++) host.finish(`s${i}`, `r${i}`);
    expect((await Promise.all(polls)).map((o) => (o.found ? o.status : 'not found'))).toEqual(Array(8).fill('returned'));
  });
});
