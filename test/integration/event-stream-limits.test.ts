import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SESSION_COOKIE } from '../../services/api/plugins/browser-session.ts';
import { eventually } from '../support/eventually.ts';
import { openEvents } from '../support/sse-follower.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * The edges of a long-lived `GET /v1/events` stream, over real sockets: it ends when its caller
 * may no longer see anything (a revoked token, a removed agent, a browser session signed out),
 * a client that leaves during the set-up leaves nothing behind, and a client that stops reading
 * is ended with its resume id instead of being buffered without bound (and loses nothing).
 */
const LIMITS = { maxBufferBytes: 64 * 1024, slowReaderMs: 1_500, recheckMs: 300 };
/** The token cache keeps a look-up at most this long (libs/handoffs/token-cache.ts). */
const TOKEN_CACHE_MS = 1_000;

let baton: TestBaton;
let api: string;
let n = 0;

async function agentWithToken(): Promise<{ id: string; token: string }> {
  const id = `a${++n}`;
  expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
  return { id, token: await baton.tokenFor(id) };
}

/**
 * A raw HTTP/1.1 GET of the stream: the test decides when (and whether) the socket is read.
 * `ended`: the response is over (its last chunk, or the connection closed). `pauseOnOpen` stops
 * reading in the same callback that sees the response's status line, so a reader that must fall
 * behind does, however late the test's own timers run on a busy machine.
 */
function rawStream(
  path: string,
  headers: Record<string, string>,
  opts: { pauseOnOpen?: boolean } = {},
): { socket: net.Socket; received: () => string; ended: Promise<void> } {
  const url = new URL(api);
  const socket = net.connect(Number(url.port), url.hostname);
  let text = '';
  let over: () => void = () => undefined;
  const ended = new Promise<void>((resolve) => (over = resolve));
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => {
    if (opts.pauseOnOpen && text === '') socket.pause();
    text += d;
    if (text.endsWith('\r\n0\r\n\r\n')) over();
  });
  socket.once('close', () => over());
  socket.write(
    `GET ${path} HTTP/1.1\r\nhost: ${url.host}\r\naccept: text/event-stream\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}\r\n`,
  );
  return { socket, received: () => text, ended };
}

beforeAll(async () => {
  baton = await startTestBaton({ eventStreamLimits: LIMITS });
  api = await baton.listen();
});

afterAll(async () => {
  await baton?.stop();
});

describe('a stream outlives nothing its caller lost', () => {
  const bound = LIMITS.recheckMs + TOKEN_CACHE_MS;

  it(`ends within recheckMs + the token cache (${bound} ms, documented) after its token is revoked, saying why, and carries nothing after`, async () => {
    const me = await agentWithToken();
    const stream = rawStream('/v1/events', { authorization: `Bearer ${me.token}` });
    await eventually(() => expect(stream.received()).toMatch(/^HTTP\/1.1 200/), { what: 'the stream opens' });
    const tokenId = (await baton.get('/v1/whoami', { authorization: `Bearer ${me.token}` })).body.tokenId as string;
    const t0 = Date.now();
    expect((await baton.del(`/v1/tokens/${tokenId}`)).status).toBe(204);
    await stream.ended;
    // Generous margin for a busy host: the bound is what the docs promise, the test allows 5 s over it.
    expect(Date.now() - t0).toBeLessThan(bound + 5_000);
    expect(stream.received()).toMatch(/: end: invalid_token/);
  });

  it('ends after its agent is removed', async () => {
    const me = await agentWithToken();
    const stream = rawStream('/v1/events', { authorization: `Bearer ${me.token}` });
    await eventually(() => expect(stream.received()).toMatch(/^HTTP\/1.1 200/), { what: 'the stream opens' });
    expect((await baton.del(`/v1/agents/${me.id}`)).status).toBe(204);
    await stream.ended;
    expect(stream.received()).toMatch(/: end: (invalid_token|unauthenticated)/);
  });

  it("ends the live page's stream when its browser session is signed out", async () => {
    const me = await agentWithToken();
    const origin = api;
    const signIn = await fetch(`${api}/ui/session`, {
      method: 'POST',
      headers: { origin, 'content-type': 'application/json' },
      body: JSON.stringify({ token: me.token }),
    });
    expect(signIn.status).toBe(200);
    const cookie = /baton_session=([^;]+)/.exec(signIn.headers.get('set-cookie') ?? '')?.[1] as string;
    const csrf = ((await signIn.json()) as { csrfToken: string }).csrfToken;
    const stream = rawStream('/v1/events', { cookie: `${SESSION_COOKIE}=${cookie}` });
    await eventually(() => expect(stream.received()).toMatch(/^HTTP\/1.1 200/), { what: 'the stream opens' });
    const out = await fetch(`${api}/ui/session`, {
      method: 'DELETE',
      headers: { origin, cookie: `${SESSION_COOKIE}=${cookie}`, 'x-csrf-token': csrf },
    });
    expect(out.status).toBeLessThan(300);
    await stream.ended;
    expect(stream.received()).toMatch(/: end: unauthenticated/);
  });
});

describe('a client that leaves during the set-up', () => {
  it('leaves no follower behind', async () => {
    const me = await agentWithToken();
    const before = baton.streams();
    const url = new URL(api);
    await Promise.all(
      Array.from({ length: 60 }, () => {
        return new Promise<void>((resolve) => {
          const socket = net.connect(Number(url.port), url.hostname, () => {
            socket.write(`GET /v1/events?after=0 HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${me.token}\r\n\r\n`, () => {
              // Gone before the server could answer: mid set-up for most of them.
              setImmediate(() => socket.destroy());
            });
          });
          socket.on('close', () => resolve());
          socket.on('error', () => undefined);
        });
      }),
    );
    await eventually(() => expect(baton.streams()).toBe(before), {
      what: 'every follower of the dropped streams is gone',
      timeoutMs: 10_000,
    });
  });
});

describe('a client that stops reading', () => {
  it('is ended with its resume id once it falls behind, after the server wrote a bounded amount, and loses nothing when it resumes', async () => {
    const me = await agentWithToken();
    const sender = await agentWithToken();
    const sent = await baton.post('/v1/handoffs', { from: sender.id, to: me.id, message: 'a long history' });
    expect(sent.status).toBe(201);
    // A long log the stream must page through: 40,000 events of ~600 bytes each (~24 MB of SSE,
    // far more than the kernel's socket buffers hold, up to about 10 MB on loopback here).
    const EVENTS = 40_000;
    await baton.db.pool.query(
      `INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, reason, revision, created_at)
       SELECT $1::uuid, 'WAITING', 'WAITING', 'provider_outage', 'system', 'test', repeat('x', 400) || g, 0, now() FROM generate_series(1, $2::int) g`,
      [sent.body.id, EVENTS],
    );
    const { rows } = await baton.db.pool.query<{ top: string }>(`SELECT max(id)::text AS top FROM handoff_events`);
    const top = BigInt(rows[0]!.top);
    const before = baton.streams();
    const stream = rawStream('/v1/events?after=0', { authorization: `Bearer ${me.token}` }, { pauseOnOpen: true });
    await eventually(() => expect(stream.received()).toMatch(/^HTTP\/1.1 200/), { what: 'the stream opens' });
    // Within slowReaderMs (plus the set-up), the server gives up on the reader and stops following.
    await eventually(() => expect(baton.streams()).toBe(before), {
      what: 'the slow reader is ended',
      timeoutMs: LIMITS.slowReaderMs + 10_000,
    });
    stream.socket.resume();
    // The server ended the response (its last chunk) or closed the connection: bounded, so a
    // stream that neither ends nor closes fails here saying what arrived.
    const endedWithin = 60_000;
    await Promise.race([
      stream.ended,
      new Promise((_, reject) =>
        setTimeout(
          () =>
            reject(
              new Error(
                `the ended stream neither finished nor closed within ${endedWithin} ms: ${stream.received().length} chars, ending ${JSON.stringify(stream.received().slice(-80))}`,
              ),
            ),
          endedWithin,
        ).unref(),
      ),
    ]);
    const text = stream.received();
    // Everything the server ever wrote fits in the socket buffers (kernel: up to 4 MiB to send
    // here) plus its own bound, not the 24 MB the log holds.
    expect(Buffer.byteLength(text)).toBeLessThan(8 * 1024 * 1024);
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => BigInt(m[1]!));
    const last = ids[ids.length - 1]!;
    expect(text).toContain(
      `: end: this stream fell more than ${LIMITS.maxBufferBytes} bytes behind its reader; reconnect with Last-Event-ID ${last} to go on without a gap`,
    );
    expect(last).toBeLessThan(top);
    // Resuming from there brings the rest, each event once, in order.
    const rest = await openEvents(api, me.token, { lastEventId: last.toString() });
    await eventually(() => expect(BigInt(rest.lastId() ?? '0')).toBe(top), {
      what: 'the resumed stream reaches the top of the log',
      timeoutMs: 120_000,
    });
    await rest.close();
    const resumed = rest.events.map((e) => BigInt(e.sseId));
    // The first stream's ids (after its opening `id: 0` line), then the resumed one's: every event of the log, once, in order.
    const seen = [...ids.slice(1), ...resumed].map(String);
    const all = await baton.db.pool.query<{ id: string }>(
      `SELECT e.id::text AS id FROM handoff_events e WHERE e.handoff_id = $1 ORDER BY e.id`,
      [sent.body.id],
    );
    expect(seen).toEqual(all.rows.map((r) => r.id));
  }, 240_000);
});
