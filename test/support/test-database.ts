import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { migrate } from '../../libs/db/migrate.ts';
import { TEST_PG_ADMIN_URL, databaseUrl } from './env.ts';

/** Runs `fn` with a connection to the test server's admin database (to create and drop databases). */
export async function withAdmin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}

let templateReady: Promise<string> | undefined;

/** Builds the migrated template once per run (an advisory lock makes parallel files wait for one builder). */
function ensureTemplate(): Promise<string> {
  const template = inject('templateDatabase');
  templateReady ??= withAdmin(async (admin) => {
    await admin.query('SELECT pg_advisory_lock(8811)');
    try {
      const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [template]);
      if (!rowCount) {
        const build = `${template}_build`;
        await admin.query(`DROP DATABASE IF EXISTS ${build} WITH (FORCE)`);
        await admin.query(`CREATE DATABASE ${build}`);
        await migrate(databaseUrl(build));
        await admin.query(`ALTER DATABASE ${build} RENAME TO ${template}`);
      }
      return template;
    } finally {
      // Ending the connection next releases the lock too.
      await admin.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
    }
  });
  return templateReady;
}

/**
 * A fresh, migrated database for one test file, cloned from the run's template (fast: a file
 * copy, no migrations). `drop()` removes it.
 */
export async function createTestDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const template = await ensureTemplate();
  // The creating process's pid is in the name: a later run drops it only once that process is gone.
  const name = `baton_t_${process.pid}_${randomBytes(5).toString('hex')}`;
  await withAdmin((admin) => admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`));
  return {
    name,
    url: databaseUrl(name),
    drop: () => withAdmin(async (c) => void (await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))),
  };
}

/**
 * A fresh test database and one pg.Client on it for the whole file (registered with beforeAll
 * and afterAll): `client()` inside a test.
 */
export function useTestDatabaseClient(): { client(): pg.Client } {
  let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  let connected: pg.Client | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    connected = new pg.Client({ connectionString: db.url });
    await connected.connect();
  });
  afterAll(async () => {
    await connected?.end();
    await db?.drop();
  });
  return {
    client: () => {
      if (!connected) throw new Error('the test database is not ready (use client() inside a test)');
      return connected;
    },
  };
}
