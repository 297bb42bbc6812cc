import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../services/chaos/fault-proxy.ts';
import { eventually } from '../support/eventually.ts';

/**
 * The chaos run's fault proxy in front of a loopback echo server: latency delays without
 * reordering, a stall holds connections open and forwards nothing until resumed, a drop breaks
 * the open connections while new ones still get through.
 */

let echo: net.Server;
let echoPort: number;
let proxy: FaultProxy;
const sockets = new Set<net.Socket>();

beforeAll(async () => {
  echo = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as net.AddressInfo).port;
  proxy = await FaultProxy.start({ targetPort: echoPort });
});

afterAll(async () => {
  await proxy.close();
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => echo.close(() => r()));
});

/** A client through the proxy that collects what comes back. */
async function client(): Promise<{ socket: net.Socket; received: () => string; closed: () => boolean }> {
  const socket = net.connect(proxy.port, '127.0.0.1');
  await new Promise<void>((r) => socket.once('connect', r));
  let data = '';
  let closed = false;
  socket.on('data', (c: Buffer) => (data += c.toString()));
  socket.on('close', () => (closed = true));
  socket.on('error', () => undefined);
  return { socket, received: () => data, closed: () => closed };
}

describe('FaultProxy', () => {
  it('forwards at once by default, and with latency delays every chunk both ways, keeping their order', async () => {
    const c = await client();
    c.socket.write('a');
    await eventually(async () => expect(c.received()).toBe('a'), { timeoutMs: 2_000, what: 'the echo' });
    proxy.setLatency(150);
    const t0 = Date.now();
    for (const ch of ['1', '2', '3', '4']) c.socket.write(ch);
    await eventually(async () => expect(c.received()).toBe('a1234'), { timeoutMs: 3_000, what: 'the delayed echo' });
    // Each way is delayed: at least two latencies before the echo is back.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    proxy.setLatency(0, 0);
    c.socket.destroy();
  });

  it('stalls: connections stay open and nothing moves until resume, then what was held arrives', async () => {
    const c = await client();
    proxy.stall();
    c.socket.write('held');
    const late = await client();
    late.socket.write('new');
    await new Promise((r) => setTimeout(r, 300));
    expect(c.received()).toBe('');
    expect(late.received()).toBe('');
    expect(c.closed()).toBe(false);
    expect(proxy.connections).toBeGreaterThanOrEqual(2);
    proxy.resume();
    await eventually(
      async () => {
        expect(c.received()).toBe('held');
        expect(late.received()).toBe('new');
      },
      { timeoutMs: 2_000, what: 'the held bytes after resume' },
    );
    c.socket.destroy();
    late.socket.destroy();
  });

  it('drops: open connections break, a new one works', async () => {
    const c = await client();
    await eventually(async () => expect(proxy.connections).toBeGreaterThanOrEqual(1), { timeoutMs: 2_000, what: 'the link' });
    expect(proxy.drop()).toBeGreaterThanOrEqual(1);
    await eventually(async () => expect(c.closed()).toBe(true), { timeoutMs: 2_000, what: 'the broken connection' });
    const next = await client();
    next.socket.write('again');
    await eventually(async () => expect(next.received()).toBe('again'), { timeoutMs: 2_000, what: 'the echo on a new connection' });
    next.socket.destroy();
  });

  it('refuses connections until accept(), on the same port', async () => {
    const port = proxy.port;
    await proxy.refuse();
    await expect(
      new Promise((resolve, reject) => {
        const s = net.connect(port, '127.0.0.1', () => resolve(s));
        s.on('error', reject);
      }),
    ).rejects.toThrow(/ECONNREFUSED/);
    await proxy.accept();
    expect(proxy.port).toBe(port);
    const c = await client();
    c.socket.write('back');
    await eventually(async () => expect(c.received()).toBe('back'), { timeoutMs: 2_000, what: 'the echo after accept' });
    c.socket.destroy();
  });
});
