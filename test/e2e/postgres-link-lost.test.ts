import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy, type ProxyLink } from '../../services/chaos/fault-proxy.ts';
import { freePort } from '../../libs/processes/embedded-infra.ts';
import { TEST_REDIS_URL } from '../support/env.ts';
import { eventually } from '../support/eventually.ts';
import { scratchDir } from '../support/scratch-dir.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { createTestDatabase } from '../support/test-database.ts';

/**
 * What ended an API process in a CPU-starved chaos run (issue 16, item 16): its Postgres
 * connection ended under a client checked out of the pool. A handoff read (GET
 * /v1/handoffs/:id, the work packet) runs on such a client, in one snapshot; the connection
 * ended meanwhile (Postgres restarting, a dropped link, or Baton itself ending one whose reply
 * did not come within BATON_DB_QUERY_TIMEOUT_MS: a frozen Postgres, or a starved machine), and
 * pg emitted 'error' on the client with no listener: the process exited 1 ("Connection
 * terminated unexpectedly", a stack). The same happened to the migration's client at start.
 * Faults here hit one statement's connection only, through a proxy that watches for it.
 */

const QUERY_TIMEOUT_MS = 1_000;
const CONNECT_TIMEOUT_MS = 1_000;
/** The snapshot's first statement (HandoffRepository.snapshot) and the migration's first. */
const SNAPSHOT = Buffer.from('REPEATABLE READ READ ONLY');
const MIGRATION = Buffer.from('pg_advisory_lock(');
/** A stack trace line, as Node prints them. */
const STACK = /^\s+at .+:\d+:\d+\)?$/m;

type Fault = { marker: Buffer; mode: 'break' | 'no reply' };
let armed: Fault | null = null;
const silenced = new WeakSet<ProxyLink>();
let proxy: FaultProxy;
let db: Awaited<ReturnType<typeof createTestDatabase>>;
let api: BatonProcess;
let url: string;
let token: string;
const home = scratchDir('baton-pglink-');
const started: BatonProcess[] = [];

/** The next statement containing `marker` has its connection broken before it runs, or runs and is never answered. */
function arm(marker: Buffer, mode: Fault['mode']): void {
  armed = { marker, mode };
}

function start(args: string[], viaProxy: string, port: number): BatonProcess {
  const p = spawnBaton(args, {
    DATABASE_URL: viaProxy,
    REDIS_URL: TEST_REDIS_URL,
    BATON_REDIS_PREFIX: `pglink${process.pid}`,
    BATON_API_PORT: String(port),
    BATON_LOG_LEVEL: 'warn',
    BATON_HOME: home,
    BATON_DB_QUERY_TIMEOUT_MS: String(QUERY_TIMEOUT_MS),
    BATON_DB_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS),
  });
  started.push(p);
  return p;
}

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json().catch(() => null)) as any };
}

const alive = (p: BatonProcess) => p.child.exitCode === null && p.child.signalCode === null;

beforeAll(async () => {
  db = await createTestDatabase();
  const target = new URL(db.url);
  proxy = await FaultProxy.start({
    targetPort: Number(target.port || 5432),
    targetHost: target.hostname,
    taps: {
      toServer(link, chunk) {
        const fault = armed;
        if (!fault || !chunk.includes(fault.marker)) return false;
        armed = null;
        if (fault.mode === 'break') {
          link.drop();
          return true;
        }
        silenced.add(link);
        return false;
      },
      toClient: (link) => silenced.has(link),
    },
  });
  const viaProxy = new URL(db.url);
  viaProxy.port = String(proxy.port);
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  api = start(['api'], viaProxy.toString(), port);
  await api.waitFor(/Baton API on/, 60_000);
  token = readFileSync(join(home, 'admin.token'), 'utf8').trim();
  for (const id of ['sender', 'reader']) expect((await call('POST', '/v1/agents', { id, provider: 'manual' })).status).toBe(201);
}, 90_000);

afterAll(async () => {
  await Promise.all(started.map((p) => p.stop('SIGKILL')));
  await proxy?.close();
  await db?.drop();
});

describe('an API whose Postgres connection ends under a handoff read', () => {
  it.each([
    ['the connection is broken mid-read (Postgres restarting, a dropped link)', 'break'],
    ['the reply never comes and the read times out (a frozen Postgres, a starved machine)', 'no reply'],
  ] as const)(
    '%s: the read is answered 503, the process stays up, unready while Postgres is gone and ready once it is back',
    async (_, mode) => {
      const sent = await call('POST', '/v1/handoffs', {
        from: 'sender',
        to: 'reader',
        message: `read under a ${mode} fault`,
        idempotencyKey: `${mode}-${randomBytes(4).toString('hex')}`,
      });
      expect(sent.status).toBe(201);
      expect((await call('GET', `/v1/handoffs/${sent.body.id}`)).status).toBe(200);

      arm(SNAPSHOT, mode);
      const read = await call('GET', `/v1/handoffs/${sent.body.id}`);
      expect(armed, 'the fault hit the read').toBeNull();
      expect(read.status).toBe(503);
      expect(read.body.error.code).toBe('database_unavailable');
      expect(alive(api), `the API exited:\n${api.output().slice(-3_000)}`).toBe(true);
      expect((await call('GET', '/v1/health')).status).toBe(200);

      // Postgres gone altogether: the API says it is not ready (and stays up); back: ready again.
      await proxy.refuse();
      try {
        const ready = await call('GET', '/v1/ready');
        expect(ready.status).toBe(503);
        expect(ready.body.checks.database).toBe('down');
        expect((await call('GET', `/v1/handoffs/${sent.body.id}`)).status).toBe(503);
        expect(alive(api)).toBe(true);
      } finally {
        await proxy.accept();
      }
      // The readiness check's own bound (1.5 s) and a new connection's, with room for a loaded host.
      await eventually(async () => expect((await call('GET', '/v1/ready')).status).toBe(200), {
        timeoutMs: 20 * (CONNECT_TIMEOUT_MS + QUERY_TIMEOUT_MS),
        what: 'ready again',
      });
      const after = await call('GET', `/v1/handoffs/${sent.body.id}`);
      expect(after.status).toBe(200);
      expect(after.body.id).toBe(sent.body.id);
      expect(alive(api)).toBe(true);
    },
    90_000,
  );
});

describe('a process whose Postgres connection ends during its migration at start', () => {
  it('exits 1 with one `cannot start` line saying Postgres went away, not with a stack', async () => {
    const viaProxy = new URL(db.url);
    viaProxy.port = String(proxy.port);
    arm(MIGRATION, 'break');
    const p = start(['api'], viaProxy.toString(), await freePort());
    const code = await p.exited();
    expect(armed, 'the fault hit the migration').toBeNull();
    expect(code).toBe(1);
    expect(p.output()).toMatch(/cannot start: Postgres at .* went away during the start \(Connection terminated unexpectedly\)/);
    expect(p.output(), 'no stack trace').not.toMatch(STACK);
  }, 90_000);
});
