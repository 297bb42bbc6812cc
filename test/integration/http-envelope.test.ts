import { connect } from 'node:net';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOG, isErrorCode } from '../../libs/domain/errors.ts';
import { buildApp } from '../../services/api/app.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { silentLogger, startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * What every answer of the API looks like, whatever produced it: a route, the 404 handler,
 * the router, the body parser, authentication, the rate limit, the error handler, or Node's
 * own HTTP parser. Refusals are `{ error: { code, message } }` with the catalog's status, and
 * every response carries `Cache-Control: private, no-store` (docs/API.md, docs/ERRORS.md).
 */

let baton: TestBaton;
/** A second app on the same dependencies: a strict rate limit, a failing readiness check and a route that throws. */
let strict: FastifyInstance;
let url: string;

beforeAll(async () => {
  baton = await startTestBaton();
  expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
  strict = await buildApp({
    core: baton.core,
    defaultProject: 'default',
    logger: silentLogger(),
    rateLimit: { limit: { perSecond: 1, burst: 1 }, redis: baton.redis, names: new RedisNames(`${baton.prefix}-strict`) },
    turnReports: baton.repos.turnReports,
    checks: {
      database: async () => {
        throw new Error('down');
      },
    },
  });
  strict.get('/v1/boom', async () => {
    throw new Error('an unexpected failure');
  });
  await strict.ready();
  url = await baton.listen();
});

afterAll(async () => {
  await strict?.close();
  await baton?.stop();
});

const admin = () => ({ authorization: `Bearer ${baton.adminToken}` });

function expectCatalogError(res: { statusCode: number; headers: Record<string, unknown>; body: string }, code: string, shown = ''): void {
  const where = `${shown} ${res.statusCode} ${res.body.slice(0, 200)}`;
  expect(String(res.headers['content-type']), where).toMatch(/^application\/json/);
  const body = JSON.parse(res.body) as { error: { code: string; message: string; details?: unknown } };
  expect(body, where).toEqual({
    error: {
      code,
      message: expect.any(String),
      ...(typeof body.error === 'object' && 'details' in body.error ? { details: expect.anything() } : {}),
    },
  });
  expect(isErrorCode(code), where).toBe(true);
  if (isErrorCode(code)) expect(res.statusCode, where).toBe(ERROR_CATALOG[code].status);
  expect(res.headers['cache-control'], where).toBe('private, no-store');
}

describe('bodies that are not JSON', () => {
  const routes = [
    ['POST', '/v1/agents'],
    ['POST', '/v1/handoffs'],
    ['POST', '/v1/handoffs/00000000-0000-4000-8000-000000000000/accept'],
    ['PUT', '/v1/settings/enabled'],
    ['PUT', '/v1/connections'],
    ['POST', '/v1/sessions'],
    ['POST', '/v1/tokens'],
    ['POST', '/v1/projects'],
    ['DELETE', '/v1/agents/lead'],
    ['POST', '/v1/webhooks/callback'],
  ] as const;
  const mediaTypes = [
    'text/plain',
    'text/plain; charset=utf-8',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/xml',
    'text/json',
  ];

  // Protects: docs/ERRORS.md's promise: a body of another media type is 415 unsupported_media_type
  // (text/plain used to be parsed as a string and refused as validation_failed).
  it('are refused with 415 unsupported_media_type on every route that takes a body, and change nothing', async () => {
    for (const [method, path] of routes) {
      for (const type of mediaTypes) {
        const res = await baton.app.inject({
          method,
          url: path,
          headers: { ...admin(), 'content-type': type },
          payload: '{"id":"lead","provider":"manual","value":true}',
        });
        expectCatalogError(res, 'unsupported_media_type', `${method} ${path} as ${type}`);
      }
    }
    // The DELETE above was refused, so the agent is still there.
    expect((await baton.get('/v1/agents/lead')).status).toBe(200);
  });

  it('while JSON with a charset is still read as JSON', async () => {
    const res = await baton.app.inject({
      method: 'POST',
      url: '/v1/sessions',
      headers: { ...admin(), 'content-type': 'application/json; charset=utf-8' },
      payload: '{"as":"lead","title":"t"}',
    });
    expect(res.statusCode, res.body).toBe(201);
  });
});

describe('Cache-Control: private, no-store on every response', () => {
  const check = (res: LightMyRequestResponse, what: string) =>
    expect(res.headers['cache-control'], `${what}: ${res.statusCode} ${res.body.slice(0, 200)}`).toBe('private, no-store');

  // Protects: docs/API.md says every /v1 response carries it; health, readiness, 404s and router errors used to carry none.
  it('health and readiness, up or down', async () => {
    for (const path of ['/v1/health', '/v1/ready', '/healthz', '/readyz']) {
      const res = await baton.app.inject({ method: 'GET', url: path });
      expect(res.statusCode, path).toBe(200);
      check(res, path);
    }
    const down = await strict.inject({ method: 'GET', url: '/v1/ready' });
    expect(down.statusCode).toBe(503);
    check(down, 'readiness while a dependency is down');
  });

  it('refusals from the 404 handler, the router, the body parser and authentication, in the catalog shape', async () => {
    const cases: Array<[string, () => Promise<LightMyRequestResponse>, string]> = [
      ['unknown /v1 route', () => baton.app.inject({ method: 'GET', url: '/v1/nope', headers: admin() }), 'route_not_found'],
      ['unknown /v1 route, no token', () => baton.app.inject({ method: 'POST', url: '/v1/handoffs/x/y/z' }), 'route_not_found'],
      ['unknown route outside /v1', () => baton.app.inject({ method: 'GET', url: '/nope' }), 'route_not_found'],
      [
        'malformed %-escape (router error)',
        () => baton.app.inject({ method: 'GET', url: '/v1/agents/%zz', headers: admin() }),
        'validation_failed',
      ],
      [
        'over-long path parameter (router error)',
        () => baton.app.inject({ method: 'GET', url: `/v1/agents/${'a'.repeat(300)}`, headers: admin() }),
        'validation_failed',
      ],
      ['no token', () => baton.app.inject({ method: 'GET', url: '/v1/status' }), 'unauthenticated'],
      [
        'unknown token',
        () => baton.app.inject({ method: 'GET', url: '/v1/status', headers: { authorization: `Bearer baton_${'A'.repeat(43)}` } }),
        'invalid_token',
      ],
      [
        'not JSON',
        () => baton.app.inject({ method: 'POST', url: '/v1/agents', headers: { ...admin(), 'content-type': 'text/plain' }, payload: 'x' }),
        'unsupported_media_type',
      ],
      [
        'broken JSON',
        () =>
          baton.app.inject({
            method: 'POST',
            url: '/v1/agents',
            headers: { ...admin(), 'content-type': 'application/json' },
            payload: '{',
          }),
        'invalid_json',
      ],
      [
        'too deep',
        () =>
          baton.app.inject({
            method: 'POST',
            url: '/v1/agents',
            headers: { ...admin(), 'content-type': 'application/json' },
            payload: `${'['.repeat(10_000)}${']'.repeat(10_000)}`,
          }),
        'too_deeply_nested',
      ],
      [
        'too large',
        () =>
          baton.app.inject({
            method: 'POST',
            url: '/v1/agents',
            headers: { ...admin(), 'content-type': 'application/json' },
            payload: `"${'a'.repeat(300_000)}"`,
          }),
        'body_too_large',
      ],
    ];
    for (const [what, call, code] of cases) expectCatalogError(await call(), code, what);
  });

  it('rate-limited (429) and failed (500) calls', async () => {
    const headers = admin();
    expect((await strict.inject({ method: 'GET', url: '/v1/whoami', headers })).statusCode).toBe(200);
    expectCatalogError(await strict.inject({ method: 'GET', url: '/v1/whoami', headers }), 'rate_limited', 'second call within the burst');
    expectCatalogError(await strict.inject({ method: 'GET', url: '/v1/boom' }), 'internal_error', 'a route that throws');
  });
});

/** One raw HTTP/1.1 exchange over a real socket: what Node's parser refuses never reaches app.inject. */
function exchange(base: string, request: string): Promise<{ statusCode: number; headers: Record<string, string>; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const [head = '', body = ''] = raw.split('\r\n\r\n', 2);
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ statusCode: Number(statusLine.split(' ')[1]), headers, body });
    });
    socket.end(request);
  });
}

describe('what Node refuses before Fastify sees it (over a real socket)', () => {
  // Protects: a 20,000-character URL got Node's own 431 body; it is a catalogued error in the usual shape, with no-store.
  it('a 20,000-character URL is 431 headers_too_large in the catalog shape', async () => {
    const res = await exchange(
      url,
      `GET /v1/handoffs?cursor=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${baton.adminToken}\r\n\r\n`,
    );
    expectCatalogError(res, 'headers_too_large', 'a 20,000-character URL');
  });

  it('headers past the limit are 431 headers_too_large too', async () => {
    const res = await exchange(url, `GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Padding: ${'p'.repeat(20_000)}\r\n\r\n`);
    expectCatalogError(res, 'headers_too_large', '20,000 bytes of headers');
  });

  it('a request that is not HTTP is 400 malformed_request', async () => {
    const res = await exchange(url, 'HELLO THERE\r\n\r\n');
    expectCatalogError(res, 'malformed_request', 'not HTTP');
  });

  it('an ordinary refusal over the socket carries no-store as well', async () => {
    const res = await exchange(url, 'GET /v1/nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expectCatalogError(res, 'route_not_found', 'unknown route');
  });
});

describe('while the API shuts down', () => {
  // Protects: a request that still arrives during the drain gets a catalogued 503 with Retry-After and no-store, not Fastify's own body.
  it('a request arriving on a busy connection is 503 shutting_down in the catalog shape', async () => {
    const app = await buildApp({
      core: baton.core,
      defaultProject: 'default',
      logger: silentLogger(),
      turnReports: baton.repos.turnReports,
      checks: {},
    });
    let entered!: () => void;
    const inSlow = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let draining!: () => void;
    const drainStarted = new Promise<void>((resolve) => (draining = resolve));
    // Runs after the app's own preClose hook: from here on the app counts as closing.
    app.addHook('preClose', async () => draining());

    app.get('/slow', async () => {
      entered();
      await released;
      return { ok: true };
    });
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    let seen = 0;
    let secondArrived!: () => void;
    const lateArrived = new Promise<void>((resolve) => (secondArrived = resolve));
    // Node emits 'request' as it parses one, after Fastify's own listener has taken it.
    app.server.on('request', () => {
      if (++seen === 2) secondArrived();
    });
    const { port } = new URL(base);
    const socket = connect({ host: '127.0.0.1', port: Number(port) });
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
    await inSlow;
    const closing = app.close();
    await drainStarted;
    // The connection is busy, so closing has not cut it: a request can still arrive on it.
    socket.write('GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n');
    // Its answer queues behind the slow one's (HTTP/1.1 keeps order): once it is in, let both go.
    await lateArrived;
    release();
    await closed;
    await closing;
    const raw = Buffer.concat(chunks).toString('utf8');
    const second = raw.slice(raw.indexOf('HTTP/1.1 503'));
    const [head = '', body = ''] = second.split('\r\n\r\n', 2);
    const [statusLine = '', ...lines] = head.split('\r\n');
    const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    expect(raw, 'the request in flight finishes').toMatch(/HTTP\/1\.1 200 OK[^]*\{"ok":true\}/);
    expectCatalogError(
      { statusCode: Number(statusLine.split(' ')[1]), headers, body },
      'shutting_down',
      'a request arriving during the drain',
    );
    expect(headers['retry-after']).toBe('2');
  });
});
