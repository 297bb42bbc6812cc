import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_URL } from '../support/env.ts';
import { eventually } from '../support/eventually.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTcpProxy } from '../support/tcp-proxy.ts';
import { createTestDatabase } from '../support/test-database.ts';
import { freePort } from '../../services/cli/embedded-infra.ts';

let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
let db: Awaited<ReturnType<typeof createTestDatabase>>;
let serve: BatonProcess;
let api: string;
let token: string;
const home = mkdtempSync(join(tmpdir(), 'baton-pgout-'));

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${api}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
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
  });
  await serve.waitFor(/Baton API on/, 30_000);
  // The API's first start on a fresh database wrote an admin token, readable by its owner only.
  token = readFileSync(join(home, 'admin.token'), 'utf8').trim();
  expect(statSync(join(home, 'admin.token')).mode & 0o777).toBe(0o600);
  for (const id of ['sender', 'receiver']) expect((await call('POST', '/v1/agents', { id, provider: 'demo', settings: { thinkMs: 300 } })).status).toBe(201);
}, 60_000);

afterAll(async () => {
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
      await eventually(async () => expect((await call('GET', `/v1/handoffs/${id}`)).body.state).toBe('RETURNED'), { timeoutMs: 20_000, what: `${id} RETURNED` });
    }
    // The refused send left no trace.
    const list = await call('GET', '/v1/handoffs?limit=200');
    expect(list.body.items.map((h: any) => h.message)).not.toContain('during the outage');
    expect(serve.child.exitCode).toBeNull();
  }, 90_000);
});
