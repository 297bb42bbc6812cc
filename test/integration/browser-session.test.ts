import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SESSION_COOKIE } from '../../services/api/plugins/browser-session.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * Browser sessions (services/api/plugins/browser-session.ts), over app.inject with a real
 * Postgres and Redis: a token traded for an HttpOnly, SameSite=Strict cookie that sees exactly
 * what the token sees; Host, Origin and CSRF checks on everything a forged page could send;
 * sign-out and revocation; the live page's files under a strict CSP; Bull Board admins-only and
 * read-only. The browser itself drives the same in test/e2e/live-page.test.ts.
 */
let baton: TestBaton;
const tokens: Record<string, string> = {};
const ORIGIN = 'http://localhost:80';

interface Session {
  cookie: string;
  csrf: string;
}

async function inject(
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  url: string,
  opts: { session?: Session; headers?: Record<string, string>; body?: unknown } = {},
) {
  const headers: Record<string, string> = {
    ...(opts.session ? { cookie: `${SESSION_COOKIE}=${opts.session.cookie}` } : {}),
    ...opts.headers,
  };
  const res = await baton.app.inject({ method, url, headers, ...(opts.body !== undefined ? { payload: opts.body as object } : {}) });
  return { status: res.statusCode, headers: res.headers, text: res.body, body: res.body.startsWith('{') ? res.json() : null };
}

async function signIn(token: string): Promise<Session> {
  const res = await inject('POST', '/ui/session', { headers: { origin: ORIGIN }, body: { token } });
  expect(res.status, res.text).toBe(200);
  const cookie = /baton_session=([^;]+)/.exec(String(res.headers['set-cookie']))?.[1];
  expect(cookie).toBeDefined();
  return { cookie: cookie as string, csrf: res.body.csrfToken as string };
}

beforeAll(async () => {
  baton = await startTestBaton();
  for (const id of ['a', 'b', 'c']) expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
  for (const id of ['a', 'b', 'c']) tokens[id] = await baton.tokenFor(id);
});

afterAll(async () => {
  await baton?.stop();
});

describe('signing a browser in', () => {
  it('trades a token for an HttpOnly, SameSite=Strict session cookie (no Secure on plain HTTP) that names its caller', async () => {
    const res = await inject('POST', '/ui/session', { headers: { origin: ORIGIN }, body: { token: tokens['a'] } });
    expect(res.status).toBe(200);
    const cookie = String(res.headers['set-cookie']);
    expect(cookie).toMatch(/^baton_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=3600; HttpOnly; SameSite=Strict$/);
    expect(res.body.caller).toEqual({ admin: false, agent: 'a', project: 'default' });
    // The cookie is not the token, and Redis keeps neither the cookie nor the token.
    expect(cookie).not.toContain(tokens['a']);
    const keys = await baton.redis.keys(`${baton.prefix}:browser-session:*`);
    const stored = await Promise.all(keys.map((k) => baton.redis.get(k)));
    expect(stored.join('')).not.toContain(tokens['a']);
    expect(keys.join('')).not.toContain(/baton_session=([^;]+)/.exec(cookie)?.[1]);
  });

  it('refuses a wrong token (401), and a sign-in posted from another origin or with no Origin (403 csrf_failed)', async () => {
    expect(
      (await inject('POST', '/ui/session', { headers: { origin: ORIGIN }, body: { token: `baton_${'x'.repeat(43)}` } })).body.error.code,
    ).toBe('invalid_token');
    const foreign = await inject('POST', '/ui/session', { headers: { origin: 'http://evil.example' }, body: { token: tokens['a'] } });
    expect([foreign.status, foreign.body.error.code]).toEqual([403, 'csrf_failed']);
    expect(foreign.headers['set-cookie']).toBeUndefined();
    expect((await inject('POST', '/ui/session', { body: { token: tokens['a'] } })).body.error.code).toBe('csrf_failed');
  });

  it('answers nothing to a Host that is not allowed (DNS rebinding): not the pages, not sign-in, not a cookie session', async () => {
    const session = await signIn(tokens['a'] as string);
    const evil = { host: 'evil.example', origin: 'http://evil.example' };
    for (const [method, url, body] of [
      ['GET', '/ui/', undefined],
      ['POST', '/ui/session', { token: tokens['a'] }],
      ['GET', '/ui/session', undefined],
      ['GET', '/v1/live', undefined],
      ['GET', '/admin/queues', undefined],
    ] as const) {
      const res = await inject(method, url, { session, headers: evil, body });
      expect([url, res.status, res.body?.error?.code]).toEqual([url, 403, 'host_not_allowed']);
    }
    // A bearer token is not a browser: its calls are not Host-bound.
    expect((await inject('GET', '/v1/live', { headers: { host: 'evil.example', authorization: `Bearer ${tokens['a']}` } })).status).toBe(
      200,
    );
  });
});

describe('a cookie session', () => {
  it('refuses a change forged by another page: no CSRF token, a wrong one, or another Origin (403 csrf_failed), and records nothing', async () => {
    const session = await signIn(tokens['a'] as string);
    const send = { to: 'b', message: 'forged?' };
    const forged: Array<Record<string, string>> = [
      { origin: ORIGIN },
      { origin: ORIGIN, 'x-csrf-token': 'wrong' },
      { origin: 'http://evil.example', 'x-csrf-token': session.csrf },
      { 'x-csrf-token': session.csrf },
    ];
    for (const headers of forged) {
      const res = await inject('POST', '/v1/handoffs', { session, headers, body: send });
      expect([res.status, res.body.error.code]).toEqual([403, 'csrf_failed']);
    }
    expect((await baton.get('/v1/handoffs?all_owners=true&sender=a')).body.items).toEqual([]);
    const real = await inject('POST', '/v1/handoffs', { session, headers: { origin: ORIGIN, 'x-csrf-token': session.csrf }, body: send });
    expect(real.status, real.text).toBe(201);
    expect(real.body.from).toBe('a');
  });

  it("shows an agent exactly what its token may see: its own handoffs and the project's unowned work, on the live view and single reads", async () => {
    const ab = (
      await baton.post('/v1/handoffs', { to: 'b', title: 'a to b', message: 'private' }, { authorization: `Bearer ${tokens['a']}` })
    ).body.id as string;
    const bc = (
      await baton.post('/v1/handoffs', { to: 'c', title: 'b to c', message: 'for c' }, { authorization: `Bearer ${tokens['b']}` })
    ).body.id as string;
    const open = (
      await baton.post('/v1/handoffs', { to: '@project', title: 'anyone', message: 'unowned' }, { authorization: `Bearer ${tokens['a']}` })
    ).body.id as string;
    const session = await signIn(tokens['c'] as string);
    const live = await inject('GET', '/v1/live', { session });
    expect(live.status, live.text).toBe(200);
    const seen = (live.body.inFlight as Array<{ id: string }>).map((h) => h.id);
    expect(seen).toContain(bc);
    expect(seen).toContain(open);
    expect(seen).not.toContain(ab);
    // What c cannot see does not leak through the agents' counts either: b's inbox shows nothing.
    expect(live.body.agents.find((x: { id: string }) => x.id === 'b')).toMatchObject({ queued: 0, live: 0, activity: 'idle' });
    expect((await inject('GET', `/v1/handoffs/${ab}`, { session })).body.error.code).toBe('handoff_not_found');
    expect((await inject('GET', '/v1/live?all_owners=true', { session })).body.error.code).toBe('forbidden');
    expect((await inject('GET', '/ui/session', { session })).body.caller).toEqual({ admin: false, agent: 'c', project: 'default' });
  });

  it('ends at sign-out (with its CSRF token) and when its token is revoked', async () => {
    const session = await signIn(tokens['b'] as string);
    expect((await inject('DELETE', '/ui/session', { session, headers: { origin: ORIGIN } })).body.error.code).toBe('csrf_failed');
    const out = await inject('DELETE', '/ui/session', { session, headers: { origin: ORIGIN, 'x-csrf-token': session.csrf } });
    expect(out.status).toBe(204);
    expect(String(out.headers['set-cookie'])).toContain('Max-Age=0');
    expect((await inject('GET', '/v1/live', { session })).body.error.code).toBe('unauthenticated');

    const created = await baton.post('/v1/tokens', { agent: 'b' });
    expect(created.status).toBe(201);
    const second = await signIn(created.body.token as string);
    expect((await inject('GET', '/v1/live', { session: second })).status).toBe(200);
    expect((await baton.del(`/v1/tokens/${created.body.record.id}`)).status).toBe(204);
    expect((await inject('GET', '/v1/live', { session: second })).body.error.code).toBe('invalid_token');
  });
});

describe('the live page', () => {
  // Links to Bull Board and the API reference are pages of this origin, not assets of this one.
  it('is served with a strict CSP, no inline script or style and no asset from another origin', async () => {
    const page = await inject('GET', '/ui/');
    expect(page.status).toBe(200);
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(page.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page.text).not.toMatch(/<style|\sstyle=|\son[a-z]+=/);
    const assets = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)]
      .map((m) => m[1] as string)
      .filter((a) => !a.startsWith('/admin') && !a.startsWith('/docs/'));
    expect(assets.length).toBeGreaterThanOrEqual(2);
    for (const asset of assets) {
      expect(asset).toMatch(/^\/ui\//);
      expect((await inject('GET', asset)).status, asset).toBe(200);
    }
  });
});

describe('Bull Board at /admin/queues', () => {
  it('is for admins only: no session is sent to sign in, an agent is refused', async () => {
    const none = await inject('GET', '/admin/queues', { headers: { accept: 'text/html' } });
    expect([none.status, none.headers.location]).toEqual([303, '/ui/sign-in?next=%2Fadmin%2Fqueues']);
    expect((await inject('GET', '/admin/queues/api/queues')).status).toBe(401);
    const agent = await signIn(tokens['a'] as string);
    const refused = await inject('GET', '/admin/queues/api/queues', { session: agent });
    expect([refused.status, refused.body.error.code]).toEqual([403, 'forbidden']);
  });

  it("lists every delivery queue to an admin's session, read-only: a write is refused and changes nothing", async () => {
    expect((await baton.post('/v1/agents', { id: 'd', provider: 'demo', pool: 'box' })).status).toBe(201);
    const admin = await signIn(baton.adminToken);
    const list = await inject('GET', '/admin/queues/api/queues', { session: admin });
    expect(list.status, list.text).toBe(200);
    const names = (list.body.queues as Array<{ name: string; readOnlyMode: boolean }>).map((q) => q.name).sort();
    expect(names).toEqual(['{delivery-demo.box-0}', '{delivery-demo.box-1}']);
    expect(list.body.queues.every((q: { readOnlyMode: boolean }) => q.readOnlyMode)).toBe(true);
    const queue = encodeURIComponent('{delivery-demo.box-0}');
    for (const url of [
      `/admin/queues/api/queues/${queue}/retry/failed`,
      `/admin/queues/api/queues/${queue}/clean/completed`,
      `/admin/queues/api/queues/${queue}/pause`,
    ]) {
      const write = await inject('PUT', url, { session: admin, headers: { origin: ORIGIN, 'x-csrf-token': admin.csrf } });
      expect([url, write.status]).toEqual([url, 405]);
    }
    const forged = await inject('PUT', `/admin/queues/api/queues/${queue}/pause`, { session: admin, headers: { origin: ORIGIN } });
    expect([forged.status, forged.body.error.code]).toEqual([403, 'csrf_failed']);
  });
});

describe('behind a TLS-terminating proxy (BATON_TRUST_PROXY)', () => {
  // What a proxy in front of Baton sends: the browser's https Origin and public name, the
  // scheme in X-Forwarded-Proto, the connection itself plain HTTP from the proxy.
  const proxied = {
    origin: 'https://baton.example',
    host: 'baton.example',
    'x-forwarded-proto': 'https',
    'x-forwarded-for': '203.0.113.9',
  };

  it('with the setting on, signs in and changes things from the https page, and the cookie is Secure', async () => {
    const behind = await startTestBaton({ trustProxy: true, allowedHosts: ['baton.example'] });
    try {
      expect((await behind.post('/v1/agents', { id: 'p', provider: 'manual' })).status).toBe(201);
      const token = await behind.tokenFor('p');
      const res = await behind.app.inject({ method: 'POST', url: '/ui/session', headers: proxied, payload: { token } });
      expect(res.statusCode, res.body).toBe(200);
      const cookie = String(res.headers['set-cookie']);
      expect(cookie).toMatch(/; Secure/);
      const session = /baton_session=([^;]+)/.exec(cookie)?.[1] as string;
      const csrf = res.json().csrfToken as string;
      const sent = await behind.app.inject({
        method: 'POST',
        url: '/v1/handoffs',
        headers: { ...proxied, cookie: `${SESSION_COOKIE}=${session}`, 'x-csrf-token': csrf },
        payload: { to: 'p', message: 'sent from the https page' },
      });
      expect(sent.statusCode, sent.body).toBe(201);
    } finally {
      await behind.stop();
    }
  });

  it('with the setting off (the default), the same https sign-in is refused csrf_failed: the proxy is not believed', async () => {
    const res = await baton.app.inject({
      method: 'POST',
      url: '/ui/session',
      headers: { ...proxied, host: 'localhost', origin: 'https://localhost' },
      payload: { token: tokens['a'] },
    });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe('csrf_failed');
  });

  it("trusting only the proxy's address ignores the same headers from anyone else", async () => {
    const behind = await startTestBaton({ trustProxy: ['10.0.0.5'], allowedHosts: ['baton.example'] });
    try {
      expect((await behind.post('/v1/agents', { id: 'q', provider: 'manual' })).status).toBe(201);
      const token = await behind.tokenFor('q');
      const fromProxy = await behind.app.inject({
        method: 'POST',
        url: '/ui/session',
        headers: proxied,
        payload: { token },
        remoteAddress: '10.0.0.5',
      });
      expect(fromProxy.statusCode, fromProxy.body).toBe(200);
      const fromElsewhere = await behind.app.inject({
        method: 'POST',
        url: '/ui/session',
        headers: proxied,
        payload: { token },
        remoteAddress: '198.51.100.7',
      });
      expect(fromElsewhere.statusCode).toBe(403);
      expect(fromElsewhere.json().error.code).toBe('csrf_failed');
    } finally {
      await behind.stop();
    }
  });
});
