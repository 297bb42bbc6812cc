import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_URL } from '../support/env.ts';
import { eventually } from '../support/eventually.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTcpProxy } from '../support/tcp-proxy.ts';
import { createTestDatabase } from '../support/test-database.ts';
import { freePort } from '../../libs/processes/embedded-infra.ts';
import { scratchDir } from '../support/scratch-dir.ts';

let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
let db: Awaited<ReturnType<typeof createTestDatabase>>;
let serve: BatonProcess;
let api: string;
let token: string;
const home = scratchDir('baton-pgout-');

/** The API's Postgres timeouts in this file: a silent Postgres must be answered within their sum. */
const QUERY_TIMEOUT_MS = 1_000;
const CONNECT_TIMEOUT_MS = 1_000;

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${api}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, headers: res.headers, body: (await res.json().catch(() => null)) as any };
}

beforeAll(async () => {
  db = await createTestDatabase();
  const target = new URL(db.url);
  proxy = await startTcpProxy(Number(target.port || 5432), target.hostname);
  const viaProxy = new URL(db.url);
  viaProxy.port = String(proxy.port);
  const port = await freePort();
  api = `http://127.0.0.1:${port}`;
  serve = spawnBaton(['serve'], {
    DATABASE_URL: viaProxy.toString(),
    REDIS_URL: TEST_REDIS_URL,
    BATON_REDIS_PREFIX: `pgout${process.pid}`,
    BATON_API_PORT: String(port),
    BATON_LOG_LEVEL: 'warn',
    BATON_HOME: home,
    BATON_DB_QUERY_TIMEOUT_MS: String(QUERY_TIMEOUT_MS),
    BATON_DB_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS),
  });
  await serve.waitFor(/Baton API on/, 30_000);
  // The API's first start on a fresh database wrote an admin token, readable by its owner only.
  token = readFileSync(join(home, 'admin.token'), 'utf8').trim();
  expect(statSync(join(home, 'admin.token')).mode & 0o777).toBe(0o600);
  for (const id of ['sender', 'receiver'])
    expect((await call('POST', '/v1/agents', { id, provider: 'demo', settings: { thinkMs: 300 } })).status).toBe(201);
}, 60_000);

afterAll(async () => {
  proxy?.thaw();
  await serve?.stop('SIGKILL');
  await proxy?.close();
  await db?.drop();
});

describe('Postgres unavailable', () => {
  it('the API answers 503 with Retry-After and records nothing; delivery resumes when Postgres returns, and nothing acknowledged is lost', async () => {
    // Acknowledged just before the outage: its delivery is cut off mid-way.
    const before = await call('POST', '/v1/handoffs', { from: 'sender', to: 'receiver', message: 'acknowledged before', title: 'before' });
    expect(before.status).toBe(201);
    await proxy.cut();

    const refused = await call('POST', '/v1/handoffs', { from: 'sender', to: 'receiver', message: 'during the outage' });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('database_unavailable');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(JSON.stringify(refused.body)).not.toMatch(/ECONNREFUSED|stack|postgres:/i);
    const read = await call('GET', `/v1/handoffs/${before.body.id}`);
    expect(read.status).toBe(503);
    const ready = await call('GET', '/v1/ready');
    expect(ready.status).toBe(503);
    expect(ready.body.checks.database).toBe('down');
    expect((await call('GET', '/v1/health')).status).toBe(200);

    await proxy.restore();
    await eventually(async () => expect((await call('GET', '/v1/ready')).status).toBe(200), { timeoutMs: 15_000 });
    const after = await call('POST', '/v1/handoffs', { from: 'sender', to: 'receiver', message: 'after', title: 'after' });
    expect(after.status).toBe(201);
    for (const id of [before.body.id, after.body.id]) {
      await eventually(async () => expect((await call('GET', `/v1/handoffs/${id}`)).body.state).toBe('RETURNED'), {
        timeoutMs: 20_000,
        what: `${id} RETURNED`,
      });
    }
    // The refused send left no trace.
    const list = await call('GET', '/v1/handoffs?limit=200');
    expect(list.body.items.map((h: any) => h.message)).not.toContain('during the outage');
    expect(serve.child.exitCode).toBeNull();
  }, 90_000);

  it('a frozen Postgres (connections open, nothing answered): the API answers 503 database_unavailable with Retry-After within the configured timeouts, and a retry with the same idempotency key stores the send once', async () => {
    const before = await call('POST', '/v1/handoffs', {
      from: 'sender',
      to: 'receiver',
      message: 'acknowledged before the freeze',
      title: 'before freeze',
    });
    expect(before.status).toBe(201);
    proxy.freeze();
    let frozenAnswer: Awaited<ReturnType<typeof call>>;
    const key = { 'idempotency-key': `frozen-${Date.now()}` };
    const body = { from: 'sender', to: 'receiver', message: 'sent while Postgres is frozen', title: 'during freeze' };
    try {
      const started = Date.now();
      frozenAnswer = await call('POST', '/v1/handoffs', body, key);
      const tookMs = Date.now() - started;
      expect(frozenAnswer.status).toBe(503);
      expect(frozenAnswer.body.error.code).toBe('database_unavailable');
      expect(Number(frozenAnswer.headers.get('retry-after'))).toBeGreaterThan(0);
      // The documented bound (connect + query timeout), with slack for a loaded machine.
      expect(tookMs).toBeLessThan(CONNECT_TIMEOUT_MS + QUERY_TIMEOUT_MS + 2_000);
      const read = await call('GET', `/v1/handoffs/${before.body.id}`);
      expect(read.status).toBe(503);
    } finally {
      proxy.thaw();
    }
    // Whether or not the first call's write landed, the retry with the same key leaves exactly one.
    const retried = await eventually(
      async () => {
        const r = await call('POST', '/v1/handoffs', body, key);
        expect([200, 201]).toContain(r.status);
        return r;
      },
      { timeoutMs: 15_000, what: 'the retried send accepted' },
    );
    for (const id of [before.body.id, retried.body.id]) {
      await eventually(async () => expect((await call('GET', `/v1/handoffs/${id}`)).body.state).toBe('RETURNED'), {
        timeoutMs: 20_000,
        what: `${id} RETURNED`,
      });
    }
    const list = await call('GET', '/v1/handoffs?limit=200');
    expect(list.body.items.filter((h: any) => h.message === body.message)).toHaveLength(1);
  }, 90_000);

  it('a send whose commit landed but whose reply was lost: 503 database_unavailable that promises nothing, and the retry with the same idempotency key returns the stored handoff (200), stored and delivered once', async () => {
    const marker = `reply lost after commit ${Date.now()}`;
    const key = { 'idempotency-key': `lost-reply-${Date.now()}` };
    const body = { from: 'sender', to: 'receiver', message: marker, title: 'lost reply' };
    const cut = proxy.cutAfterReply(marker);
    const first = await call('POST', '/v1/handoffs', body, key);
    await cut;
    expect(first.status).toBe(503);
    expect(first.body.error.code).toBe('database_unavailable');
    // The commit landed: the answer must not claim otherwise, and must say how to retry.
    expect(first.body.error.message).not.toMatch(/nothing was recorded/i);
    expect(first.body.error.message).toMatch(/Idempotency-Key/);
    const retried = await call('POST', '/v1/handoffs', body, key);
    expect(retried.status).toBe(200);
    await eventually(async () => expect((await call('GET', `/v1/handoffs/${retried.body.id}`)).body.state).toBe('RETURNED'), {
      timeoutMs: 20_000,
      what: 'the stored send delivered',
    });
    const list = await call('GET', '/v1/handoffs?limit=200');
    expect(list.body.items.filter((h: any) => h.message === marker)).toHaveLength(1);
    const detail = await call('GET', `/v1/handoffs/${retried.body.id}`);
    expect(detail.body.attempts).toHaveLength(1);
  }, 90_000);
});
