import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import pg from 'pg';

/** prisma/migrations, next to the schema. Each folder holds one migration.sql. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../prisma/migrations/', import.meta.url));

/** Any constant works; it only has to be the same in every Baton process. */
const ADVISORY_LOCK_KEY = 7_291_001_462n;

export interface Migration {
  readonly name: string;
  readonly sql: string;
  readonly checksum: string;
}

export class MigrationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MigrationError';
  }
}

export async function readMigrations(dir: string = MIGRATIONS_DIR): Promise<Migration[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(path.join(dir, name, 'migration.sql'), 'utf8');
      return { name, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    }),
  );
}

/**
 * Applies every migration not yet recorded in `baton_migrations`, each in its own transaction.
 * Safe to run twice and from many processes at once: a session advisory lock serialises the
 * runners, and each one re-reads what is applied after taking it.
 * @returns the names applied by this call (empty when the database was up to date).
 * @throws MigrationError when an applied migration's file has changed since it was applied.
 */
export async function migrate(connectionString: string, dir: string = MIGRATIONS_DIR): Promise<string[]> {
  const migrations = await readMigrations(dir);
  // Bounded: a Postgres host that drops packets must not hang `baton init` or a start forever.
  const client = new pg.Client({ connectionString, application_name: 'baton-migrate', connectionTimeoutMillis: 10_000 });
  // A connection that ends mid-migration (Postgres restarting, a dropped link) fails the
  // statement in flight, which the caller reports; the same error emitted on the client with
  // no listener would end the process with a stack instead.
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [ADVISORY_LOCK_KEY.toString()]);
    await client.query(`CREATE TABLE IF NOT EXISTS baton_migrations (
      name text PRIMARY KEY,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ name: string; checksum: string }>('SELECT name, checksum FROM baton_migrations');
    const applied = new Map(rows.map((r) => [r.name, r.checksum]));
    const done: string[] = [];
    for (const m of migrations) {
      const seen = applied.get(m.name);
      if (seen !== undefined) {
        if (seen !== m.checksum) {
          throw new MigrationError(`migration ${m.name} was changed after it was applied; add a new migration instead`);
        }
        continue;
      }
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO baton_migrations (name, checksum) VALUES ($1, $2)', [m.name, m.checksum]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw new MigrationError(`migration ${m.name} failed: ${(err as Error).message}`);
      }
      done.push(m.name);
    }
    return done;
  } finally {
    // Ending the connection next releases the lock too.
    await client.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
    await client.end();
  }
}
