import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { TEST_PG_ADMIN_URL, databaseUrl } from './env.ts';

/**
 * A fresh, migrated database for one test file, cloned from the run's template (fast: a file
 * copy, no migrations). `drop()` removes it.
 */
export async function createTestDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const template = inject('templateDatabase');
  const name = `baton_t_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  } finally {
    await admin.end();
  }
  return {
    name,
    url: databaseUrl(name),
    async drop() {
      const c = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
