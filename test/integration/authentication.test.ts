import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../libs/logging/create-logger.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * Every call proves who it is with a bearer token; a call that cannot is refused with the
 * right status and code, and changes nothing. Secrets never leave the response that created
 * them: not into logs, error messages, listings or the database.
 */
let baton: TestBaton;
const logLines: string[] = [];
let alice: string;
let foreign: string;

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

/** Everything a refused call could have touched, as one comparable value. */
async function snapshot() {
  const { rows } = await baton.db.pool.query(`
    SELECT (SELECT count(*)::int FROM handoffs) AS handoffs, (SELECT count(*)::int FROM handoff_events) AS events,
      (SELECT count(*)::int FROM agents WHERE removed_at IS NULL) AS agents, (SELECT count(*)::int FROM agent_tokens) AS tokens,
      (SELECT count(*)::int FROM agent_tokens WHERE revoked_at IS NOT NULL) AS revoked, (SELECT count(*)::int FROM sessions) AS sessions,
      (SELECT count(*)::int FROM facts) AS facts, (SELECT count(*)::int FROM projects) AS projects,
      (SELECT count(*)::int FROM connections) AS connections, (SELECT count(*)::int FROM settings) AS settings,
      (SELECT coalesce(sum(revision + work_revision), 0)::int FROM handoffs) AS revisions`);
  return rows[0];
}

async function refusedUnchanged(call: () => Promise<{ status: number; body: any }>, status: number, code: string, what: string) {
  const before = await snapshot();
  const res = await call();
  expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(status);
  expect(res.body.error.code, what).toBe(code);
  expect(await snapshot(), `${what} changed nothing`).toEqual(before);
  return res;
}

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  });
  baton = await startTestBaton({ logger: createLogger({ level: 'trace', name: 'auth-test' }, sink) });
  for (const id of ['alice', 'bob', 'carol']) expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
  expect((await baton.post('/v1/projects', { id: 'elsewhere' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'zed', provider: 'manual' }, { 'x-baton-project': 'elsewhere' })).status).toBe(201);
  alice = await baton.tokenFor('alice');
  foreign = await baton.tokenFor('zed', 'elsewhere');
});

afterAll(async () => {
  await baton?.stop();
});

describe('a missing or malformed Authorization header', () => {
  const body = { to: 'bob', message: 'hi', title: 'work' };
  for (const [what, headers, code] of [
    ['no header', { authorization: '' }, 'unauthenticated'],
    ['an empty Bearer', { authorization: 'Bearer ' }, 'unauthenticated'],
    ['Basic auth', { authorization: 'Basic YWxpY2U6cHc=' }, 'unauthenticated'],
    ['a token of the wrong shape', { authorization: 'Bearer hunter2' }, 'unauthenticated'],
    ['two tokens', { authorization: 'Bearer baton_aaaa baton_bbbb' }, 'unauthenticated'],
    ['a well-formed token nobody issued', { authorization: `Bearer baton_${'A'.repeat(43)}` }, 'invalid_token'],
  ] as const) {
    it(`${what}: 401 ${code}, nothing written, and the body is never looked at`, async () => {
      await refusedUnchanged(() => baton.post('/v1/handoffs', body, headers), 401, code, what);
      // Refused before the body is parsed: invalid JSON gets the same 401, not a 400.
      const raw = await baton.app.inject({
        method: 'POST',
        url: '/v1/handoffs',
        payload: '{"to":',
        headers: { 'content-type': 'application/json', ...(headers.authorization ? headers : {}) },
      });
      expect(raw.statusCode, what).toBe(401);
      // Reads too.
      expect((await baton.get('/v1/handoffs', headers)).status, what).toBe(401);
    });
  }
});

describe('identity comes from the token, never from the body', () => {
  it('a forged sender is refused with 403 identity_mismatch and nothing is recorded', async () => {
    const res = await refusedUnchanged(
      () => baton.post('/v1/handoffs', { from: 'bob', to: 'carol', message: 'from bob, honest' }, auth(alice)),
      403,
      'identity_mismatch',
      'forged from',
    );
    expect(res.body.error.message).toContain('alice');
  });

  it('a forged `as` is refused on every action, and on sessions and facts', async () => {
    const sent = await baton.post('/v1/handoffs', { to: 'bob', title: 'work', message: 'do it' }, auth(alice));
    expect(sent.status).toBe(201);
    expect(sent.body.from).toBe('alice');
    const id = sent.body.id;
    const session = await baton.post('/v1/sessions', { title: 'shared' }, auth(alice));
    expect(session.status).toBe(201);
    for (const [path, body] of [
      [`/v1/handoffs/${id}/accept`, { as: 'bob' }],
      [`/v1/handoffs/${id}/heartbeat`, { as: 'bob', claimToken: 'x' }],
      [`/v1/handoffs/${id}/return`, { as: 'bob', claimToken: 'x', summary: 'done' }],
      [`/v1/handoffs/${id}/close`, { as: 'carol', resolution: 'accepted' }],
      [`/v1/handoffs/${id}/cancel`, { as: 'carol' }],
      [`/v1/handoffs/${id}/acknowledge`, { as: 'bob' }],
      [`/v1/handoffs/${id}/release`, { as: 'carol' }],
      ['/v1/sessions', { as: 'bob', title: 'as bob' }],
      [`/v1/sessions/${session.body.id}/facts`, { as: 'bob', kind: 'decision', text: 'bob decided' }],
    ] as const) {
      await refusedUnchanged(() => baton.post(path, body, auth(alice)), 403, 'identity_mismatch', path);
    }
    // Naming itself is fine (any case).
    expect((await baton.post(`/v1/handoffs/${id}/cancel`, { as: 'ALICE' }, auth(alice))).status).toBe(200);
  });

  it('an agent token cannot do what only an admin may', async () => {
    for (const [method, path, body] of [
      ['POST', '/v1/agents', { id: 'mallory', provider: 'manual' }],
      ['DELETE', '/v1/agents/bob', undefined],
      ['PUT', '/v1/settings/enabled', { value: false }],
      ['PUT', '/v1/connections', { from: 'bob', to: 'alice', rule: 'block' }],
      ['POST', '/v1/tokens', { agent: 'bob' }],
      ['POST', '/v1/tokens', { admin: true }],
      ['GET', '/v1/tokens', undefined],
      ['POST', '/v1/projects', { id: 'mine' }],
    ] as const) {
      const call = async () => {
        const res = await baton.app.inject({ method, url: path, ...(body ? { payload: body } : {}), headers: auth(alice) });
        return { status: res.statusCode, body: res.json() };
      };
      await refusedUnchanged(call, 403, 'forbidden', `${method} ${path}`);
    }
  });
});

describe('a token of another project', () => {
  it('sees nothing of this project and cannot reach into it', async () => {
    const sent = await baton.post('/v1/handoffs', { to: 'bob', message: 'internal' }, auth(alice));
    // Its own project is the only one it acts in: naming another is refused, whether or not it exists.
    await refusedUnchanged(
      () => baton.get('/v1/handoffs', { ...auth(foreign), 'x-baton-project': 'default' }),
      403,
      'forbidden',
      'header naming default',
    );
    await refusedUnchanged(
      () => baton.get('/v1/handoffs', { ...auth(foreign), 'x-baton-project': 'nonexistent' }),
      403,
      'forbidden',
      'header naming a missing project',
    );
    await refusedUnchanged(
      () => baton.post('/v1/handoffs', { to: 'bob', message: 'hi' }, { ...auth(foreign), 'x-baton-project': 'default' }),
      403,
      'forbidden',
      'send into default',
    );
    // Without a header it is in its own project, where the handoff does not exist.
    await refusedUnchanged(
      () => baton.get(`/v1/handoffs/${sent.body.id}`, auth(foreign)),
      404,
      'handoff_not_found',
      'read across projects',
    );
    await refusedUnchanged(
      () => baton.post(`/v1/handoffs/${sent.body.id}/accept`, {}, auth(foreign)),
      404,
      'handoff_not_found',
      'claim across projects',
    );
    // Agents of another project are not recipients here.
    await refusedUnchanged(
      () => baton.post('/v1/handoffs', { to: 'bob', message: 'hi' }, auth(foreign)),
      422,
      'unknown_recipient',
      'send to an agent of another project',
    );
    const mine = await baton.get('/v1/handoffs', auth(foreign));
    expect(mine.status).toBe(200);
    expect(mine.body.items).toEqual([]);
    expect((await baton.get('/v1/status', auth(foreign))).body.total).toBe(0);
    expect((await baton.get('/v1/projects', auth(foreign))).body.items.map((p: any) => p.id)).toEqual(['elsewhere']);
  });
});

describe('revocation', () => {
  it('a revoked token is refused from the very next request, and so is the token of a removed agent', async () => {
    const created = await baton.post('/v1/tokens', { agent: 'carol', name: 'carol laptop' });
    expect(created.status).toBe(201);
    const token = created.body.token;
    expect((await baton.get('/v1/whoami', auth(token))).body).toMatchObject({ agent: 'carol', admin: false, project: 'default' });
    expect((await baton.del(`/v1/tokens/${created.body.record.id}`)).status).toBe(204);
    await refusedUnchanged(
      () => baton.post('/v1/handoffs', { to: 'bob', message: 'after revoke' }, auth(token)),
      401,
      'invalid_token',
      'revoked',
    );
    await refusedUnchanged(() => baton.get('/v1/handoffs', auth(token)), 401, 'invalid_token', 'revoked read');
    // Revoking twice: it is no longer a live token.
    expect((await baton.del(`/v1/tokens/${created.body.record.id}`)).body.error.code).toBe('token_not_found');
    // A token may revoke itself.
    const own = await baton.tokenFor('bob');
    const me = (await baton.get('/v1/whoami', auth(own))).body.tokenId;
    expect((await baton.del(`/v1/tokens/${me}`, auth(own))).status).toBe(204);
    expect((await baton.get('/v1/whoami', auth(own))).status).toBe(401);
    // Removing an agent retires its tokens.
    expect((await baton.post('/v1/agents', { id: 'temp', provider: 'manual' })).status).toBe(201);
    const temp = await baton.tokenFor('temp');
    expect((await baton.del('/v1/agents/temp')).status).toBe(204);
    expect((await baton.get('/v1/whoami', auth(temp))).body.error.code).toBe('invalid_token');
  });
});

describe('a removed agent', () => {
  it('keeps its old tokens dead when its handle is registered again (a token belongs to one generation); a new token works', async () => {
    expect((await baton.post('/v1/agents', { id: 'e1', provider: 'manual' })).status).toBe(201);
    const created = await baton.post('/v1/tokens', { agent: 'e1', name: 'e1 before removal' });
    expect(created.status).toBe(201);
    const old: string = created.body.token;
    expect((await baton.get('/v1/whoami', auth(old))).body).toMatchObject({ agent: 'e1' });

    expect((await baton.del('/v1/agents/e1')).status).toBe(204);
    const readded = await baton.post('/v1/agents', { id: 'e1', provider: 'manual' });
    expect(readded.status).toBe(201);
    expect(readded.body.generation).toBe(2);

    await refusedUnchanged(() => baton.get('/v1/whoami', auth(old)), 401, 'invalid_token', 'old token after re-adding');
    await refusedUnchanged(
      () => baton.post('/v1/handoffs', { to: 'bob', message: 'from the old e1' }, auth(old)),
      401,
      'invalid_token',
      'old token sends',
    );
    // The listing says the removal ended it.
    const listed = (await baton.get('/v1/tokens')).body.items.find((t: any) => t.id === created.body.record.id);
    expect(listed).toMatchObject({ agent: 'e1', agentGeneration: 1, revokedAt: expect.any(String) });

    const fresh = await baton.post('/v1/tokens', { agent: 'e1', name: 'e1 again' });
    expect(fresh.body.record).toMatchObject({ agentGeneration: 2, revokedAt: null });
    expect((await baton.get('/v1/whoami', auth(fresh.body.token))).body).toMatchObject({ agent: 'e1', admin: false });
    expect((await baton.post('/v1/handoffs', { to: 'bob', message: 'from the new e1' }, auth(fresh.body.token))).status).toBe(201);

    // Even a revocation undone behind Baton's back does not revive it: the token is bound to
    // the generation it was issued for, and the agent has moved on.
    await baton.db.pool.query(`UPDATE agent_tokens SET revoked_at = NULL WHERE id = $1`, [created.body.record.id]);
    await refusedUnchanged(() => baton.get('/v1/whoami', auth(old)), 401, 'invalid_token', 'old token, revocation cleared');
  });
});

describe('secrets', () => {
  it('a token is shown once; listings, the database, error messages and logs never hold it', async () => {
    const created = await baton.post('/v1/tokens', { agent: 'alice', name: 'ci' });
    const secret: string = created.body.token;
    expect(secret).toMatch(/^baton_[A-Za-z0-9_-]{43}$/);
    const listed = await baton.get('/v1/tokens');
    expect(listed.body.items.some((t: any) => t.id === created.body.record.id)).toBe(true);
    expect(JSON.stringify(listed.body)).not.toContain(secret);
    expect(JSON.stringify(listed.body)).not.toContain(secret.slice(6, 20));
    // Only a hash is stored.
    const { rows } = await baton.db.pool.query(`SELECT t::text AS row FROM agent_tokens t`);
    for (const r of rows) expect(r.row).not.toContain(secret.slice(6));
    // Use it, misuse it, and make the API log at trace level.
    expect((await baton.post('/v1/handoffs', { to: 'bob', message: 'with the ci token' }, auth(secret))).status).toBe(201);
    const wrong = `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`;
    const refused = await baton.get('/v1/handoffs', auth(wrong));
    expect(refused.status).toBe(401);
    expect(JSON.stringify(refused.body)).not.toContain(wrong.slice(6));
    await baton.app.inject({
      method: 'POST',
      url: '/v1/handoffs',
      payload: '{oops',
      headers: { 'content-type': 'application/json', ...auth(secret) },
    });
    const logs = logLines.join('');
    expect(logs.length).toBeGreaterThan(0);
    for (const s of [secret, wrong, baton.adminToken, alice]) expect(logs).not.toContain(s.slice(6));
  });
});

describe('rate limits', () => {
  it('a burst from one token gets 429 with Retry-After; other tokens are unaffected and the refused calls write nothing', async () => {
    const limited = await startTestBaton({ rateLimit: { perSecond: 1, burst: 5 } });
    try {
      expect((await limited.post('/v1/agents', { id: 'busy', provider: 'manual' })).status).toBe(201);
      expect((await limited.post('/v1/agents', { id: 'calm', provider: 'manual' })).status).toBe(201);
      const busy = await limited.tokenFor('busy');
      const calm = await limited.tokenFor('calm');
      const results = [];
      for (let i = 0; i < 12; i++) {
        const res = await limited.app.inject({
          method: 'POST',
          url: '/v1/handoffs',
          payload: { to: 'calm', message: `burst ${i}` },
          headers: auth(busy),
        });
        results.push(res);
      }
      const ok = results.filter((r) => r.statusCode === 201);
      const limitedOnes = results.filter((r) => r.statusCode === 429);
      expect(ok.length).toBeGreaterThanOrEqual(5);
      expect(ok.length).toBeLessThan(12);
      expect(limitedOnes.length).toBe(12 - ok.length);
      for (const r of limitedOnes) {
        expect(r.json().error.code).toBe('rate_limited');
        expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      }
      // Only the accepted calls were recorded.
      const { rows } = await limited.db.pool.query(`SELECT count(*)::int AS n FROM handoffs`);
      expect(rows[0].n).toBe(ok.length);
      // Another token has a bucket of its own.
      expect((await limited.get('/v1/handoffs', auth(calm))).status).toBe(200);
    } finally {
      await limited.stop();
    }
  });
});

describe('audit', () => {
  it('changes outside the handoff log leave a row naming the token that made them; refused ones leave none', async () => {
    const me = (await baton.get('/v1/whoami', auth(alice))).body.tokenId;
    const admin = (await baton.get('/v1/whoami')).body.tokenId;
    const session = await baton.post('/v1/sessions', { title: 'audited' }, auth(alice));
    expect(session.status).toBe(201);
    expect((await baton.post('/v1/agents', { id: 'audited', provider: 'manual' })).status).toBe(201);
    expect((await baton.post('/v1/agents', { id: 'nope', provider: 'manual' }, auth(alice))).status).toBe(403);
    const { eventually } = await import('../support/eventually.ts');
    const rows = await eventually(async () => {
      const res = await baton.get('/v1/audit?limit=50');
      expect(res.status).toBe(200);
      const items = res.body.items as Array<{ tokenId: string; method: string; route: string; params: unknown }>;
      expect(items.some((r) => r.tokenId === me && r.route === '/v1/sessions')).toBe(true);
      expect(items.some((r) => r.tokenId === admin && r.route === '/v1/agents')).toBe(true);
      return items;
    });
    expect(rows.filter((r) => r.tokenId === me && r.route === '/v1/agents')).toEqual([]);
    // Only admins read the audit log.
    expect((await baton.get('/v1/audit', auth(alice))).status).toBe(403);
  });
});

describe('directed connections', () => {
  it("are checked on send: a blocked sender's handoff is HELD at once (no attempt), cannot be claimed, and goes out when allowed", async () => {
    expect((await baton.put('/v1/connections', { from: 'alice', to: 'carol', rule: 'block' })).status).toBe(200);
    const sent = await baton.post('/v1/handoffs', { to: 'carol', title: 'blocked work', message: 'please' }, auth(alice));
    expect(sent.status).toBe(201);
    // The answer to the send already says so.
    expect(sent.body.state).toBe('HELD');
    expect(sent.body.detail).toContain('blocked');
    const carol = await baton.tokenFor('carol');
    const claim = await baton.post(`/v1/handoffs/${sent.body.id}/accept`, {}, auth(carol));
    expect(claim.status).toBe(409);
    expect(claim.body.error.code).toBe('handoff_held');
    const shown = await baton.get(`/v1/handoffs/${sent.body.id}`, auth(alice));
    expect(shown.body.attempts).toEqual([]);
    // Another pair is unaffected.
    expect((await baton.post('/v1/handoffs', { to: 'bob', message: 'not blocked' }, auth(alice))).body.state).not.toBe('HELD');
    // Allowing it lifts the hold (the reconciler re-evaluates holds) and the work can be claimed.
    expect((await baton.put('/v1/connections', { from: 'alice', to: 'carol', rule: 'allow' })).status).toBe(200);
    baton.startWorker();
    await baton.reconcile();
    expect((await baton.get(`/v1/handoffs/${sent.body.id}`, auth(alice))).body.state).toBe('WAITING');
    expect((await baton.post(`/v1/handoffs/${sent.body.id}/accept`, {}, auth(carol))).status).toBe(200);
  });
});
