import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../libs/db/open-database.ts';
import { eventually } from '../support/eventually.ts';
import { silentLogger, startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * A connection Postgres ends while its client is out of the pool but between statements (a
 * restart terminates every backend with 57P01) must not end the process: pg emits 'error' with
 * no statement to fail it, and an 'error' nobody listens to ends a Node process. An API died so
 * in a chaos run (Postgres restarted under load). The client's next statement fails instead,
 * and the pool goes on with new connections.
 */
let baton: TestBaton;
let db: Database;

beforeAll(async () => {
  baton = await startTestBaton();
  db = openDatabase({ url: baton.databaseUrl, poolSize: 2, logger: silentLogger() });
});

afterAll(async () => {
  await db?.close();
  await baton?.stop();
});

describe('a connection that ends between statements', () => {
  it('while its client is checked out and idle: no unhandled error, its next statement fails, the pool serves on', async () => {
    const client = await db.pool.connect();
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    // Terminated by Postgres as a restart does (57P01 "terminating connection due to administrator command").
    await baton.db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    // The FATAL message reaches the client with no statement running; the process lives on.
    await eventually(
      async () =>
        expect((await baton.db.pool.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [pid])).rows[0].n).toBe(0),
      {
        what: 'the backend is gone',
      },
    );
    await expect(client.query('SELECT 1')).rejects.toThrow();
    client.release(true);
    expect((await db.pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
  });
});
