import { cp, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { MIGRATIONS_DIR, readMigrations } from '../../libs/db/migrate.ts';
import { TEST_PG_ADMIN_URL, databaseUrl } from './env.ts';

async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/**
 * For a test of one migration run over data written before it: an empty database of its own
 * (`baton_t_<tag>_<pid>`) and a directory holding only the migrations older than `migration`
 * (pass it to migrate() to build the schema as it was, then migrate() the rest).
 */
export async function databaseBefore(
  migration: string,
  tag: string,
): Promise<{ url: string; migrationsBefore: string; drop(): Promise<void> }> {
  const name = `baton_t_${tag}_${process.pid}`;
  await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin(`CREATE DATABASE ${name}`);
  const migrationsBefore = await mkdtemp(path.join(os.tmpdir(), `baton-${tag}-`));
  for (const m of await readMigrations()) {
    if (m.name >= migration) continue;
    await cp(path.join(MIGRATIONS_DIR, m.name), path.join(migrationsBefore, m.name), { recursive: true });
  }
  return {
    url: databaseUrl(name),
    migrationsBefore,
    async drop() {
      await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await rm(migrationsBefore, { recursive: true, force: true });
    },
  };
}
