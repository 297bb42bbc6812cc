import { createHash } from 'node:crypto';
import pg from 'pg';
import { migrate, readMigrations } from '../../libs/db/migrate.ts';
import { TEST_PG_ADMIN_URL, databaseUrl } from './env.ts';

/**
 * Builds the migrated template database once per run (named by the migrations' checksum, so
 * it is reused while they do not change). Each test file clones it: see test-database.ts.
 */
export default async function setup({ provide }: { provide: (key: string, value: unknown) => void }): Promise<void> {
  const migrations = await readMigrations();
  const digest = createHash('sha256').update(migrations.map((m) => `${m.name}:${m.checksum}`).join('|')).digest('hex').slice(0, 12);
  const template = `baton_tpl_${digest}`;
  const admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query('SELECT pg_advisory_lock(8811)');
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [template]);
    if (!rowCount) {
      await admin.query(`CREATE DATABASE ${template}_build`).catch(async () => {
        await admin.query(`DROP DATABASE ${template}_build WITH (FORCE)`);
        await admin.query(`CREATE DATABASE ${template}_build`);
      });
      await migrate(databaseUrl(`${template}_build`));
      await admin.query(`ALTER DATABASE ${template}_build RENAME TO ${template}`);
    }
    // Drop test databases left over from earlier runs (each run makes its own).
    const { rows } = await admin.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname LIKE 'baton_t\\_%' ESCAPE '\\'`,
    );
    for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    const { rows: old } = await admin.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname LIKE 'baton_tpl_%' AND datname <> $1 AND datname NOT LIKE '%_build'`,
      [template],
    );
    for (const { datname } of old) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  } finally {
    await admin.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
    await admin.end();
  }
  provide('templateDatabase', template);
}

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabase: string;
  }
}
