import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyDatabaseError } from '../../libs/db/classify-error.ts';
import { openDatabase, type Database } from '../../libs/db/open-database.ts';
import { createRepositories } from '../../libs/db/repositories.ts';
import { eventually } from '../support/eventually.ts';
import { startTcpProxy } from '../support/tcp-proxy.ts';
import { createTestDatabase } from '../support/test-database.ts';
import { silentLogger } from '../support/test-baton.ts';

// A frozen Postgres (or a partition) keeps connections open and answers nothing: every call
// must still end, as database_unavailable, within the configured timeouts.
const timeouts = { queryMs: 400, connectMs: 400 };
/** Generous slack for a loaded CI machine; what matters is that the call ends at all. */
const SLACK_MS = 2_000;

let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
let db: Database;

beforeAll(async () => {
  testDb = await createTestDatabase();
  const target = new URL(testDb.url);
  proxy = await startTcpProxy(Number(target.port || 5432), target.hostname);
  const viaProxy = new URL(testDb.url);
  viaProxy.port = String(proxy.port);
  // One connection: a timed-out client handed back to the pool would be the next caller's.
  db = openDatabase({ url: viaProxy.toString(), poolSize: 1, logger: silentLogger(), timeouts });
});

afterAll(async () => {
  proxy?.thaw();
  await db?.close();
  await proxy?.close();
  await testDb?.drop();
});

async function failsAsUnavailable(call: () => Promise<unknown>): Promise<number> {
  const started = Date.now();
  const err = await call().then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, 'the call should fail while Postgres is frozen').not.toBeNull();
  expect(classifyDatabaseError(err)).toMatchObject({ code: 'database_unavailable', status: 503 });
  return Date.now() - started;
}

describe('database calls against a Postgres that stops answering', () => {
  it('a statement on an open connection (raw SQL and a Prisma transaction) fails as database_unavailable within the query timeout, and its connection is ended, not reused', async () => {
    const repos = createRepositories(db);
    // The pool's one connection is open and idle when Postgres freezes.
    await db.prisma.$transaction(async (tx) => tx.$queryRaw`SELECT 1`);
    expect(proxy.connections).toBe(1);
    proxy.freeze();
    try {
      const raw = await failsAsUnavailable(() => repos.handoffs.findById('00000000-0000-7000-8000-000000000000'));
      expect(raw).toBeLessThan(timeouts.connectMs + timeouts.queryMs + SLACK_MS);
      // The timed-out connection was closed by Baton, so nobody waits behind its lost reply.
      await eventually(() => expect(proxy.connections).toBe(0), { what: 'the timed-out connection ended' });

      const inTransaction = await failsAsUnavailable(() =>
        db.prisma.$transaction(async (tx) => tx.$queryRaw`SELECT pg_sleep(0)`, { timeout: 60_000, maxWait: 60_000 }),
      );
      expect(inTransaction).toBeLessThan(timeouts.connectMs + timeouts.queryMs + SLACK_MS);
    } finally {
      proxy.thaw();
    }
    // Postgres is back: the next call gets a healthy connection at once.
    await eventually(async () => expect(await db.pool.query('SELECT 1 AS ok')).toMatchObject({ rows: [{ ok: 1 }] }), { timeoutMs: 5_000 });
  });

  it('a transaction whose statement gets no reply ends its connection: the next caller on the one-connection pool is not stuck behind it', async () => {
    await db.pool.query('SELECT 1');
    const hung = db.prisma.$transaction(
      async (tx) => {
        await tx.$queryRaw`SELECT 1`;
        proxy.freeze();
        await tx.$queryRaw`SELECT 2`;
      },
      { timeout: 60_000, maxWait: 60_000 },
    );
    await failsAsUnavailable(() => hung);
    // The frozen connection was ended by Baton; a new one, once Postgres answers, serves the next call.
    await eventually(() => expect(proxy.connections).toBe(0), { what: 'the timed-out transaction connection ended' });
    proxy.thaw();
    const started = Date.now();
    await db.prisma.$queryRaw`SELECT 1`;
    expect(Date.now() - started).toBeLessThan(timeouts.queryMs);
  });
});
