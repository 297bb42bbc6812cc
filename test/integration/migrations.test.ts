import { mkdir, writeFile, cp, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS_DIR, MigrationError, migrate, readMigrations } from '../../libs/db/migrate.ts';
import { TEST_PG_ADMIN_URL, databaseUrl } from '../support/env.ts';
import { scratchDir } from '../support/scratch-dir.ts';

// baton_t_<pid>_...: the global set-up of a concurrent run leaves a live process's databases alone.
const name = `baton_t_${process.pid}_mig`;
const url = databaseUrl(name);

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  await admin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.query(`CREATE DATABASE ${name}`);
  });
});

afterAll(async () => {
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
});

describe('migrations', () => {
  it('apply once even when five processes run them at the same time on an empty database', async () => {
    const all = await readMigrations();
    const results = await Promise.all(Array.from({ length: 5 }, () => migrate(url)));
    const applied = results.flat();
    expect(applied.sort()).toEqual(all.map((m) => m.name).sort());
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const { rows } = await c.query<{ name: string }>('SELECT name FROM baton_migrations ORDER BY name');
    await c.end();
    expect(rows.map((r) => r.name)).toEqual(all.map((m) => m.name));
  });

  it('apply nothing the second time', async () => {
    expect(await migrate(url)).toEqual([]);
  });

  it('refuse to run when an applied migration was edited afterwards', async () => {
    const dir = scratchDir('baton-mig-');
    await cp(MIGRATIONS_DIR, dir, { recursive: true });
    const first = (await readMigrations(dir))[0]!;
    const file = path.join(dir, first.name, 'migration.sql');
    await writeFile(file, `${await readFile(file, 'utf8')}\n-- edited\n`);
    await expect(migrate(url, dir)).rejects.toBeInstanceOf(MigrationError);
  });

  it('roll a failing migration back completely and record nothing', async () => {
    const dir = scratchDir('baton-mig-');
    await cp(MIGRATIONS_DIR, dir, { recursive: true });
    await mkdir(path.join(dir, '99999999999999_broken'));
    await writeFile(
      path.join(dir, '99999999999999_broken', 'migration.sql'),
      'CREATE TABLE half_done (id int);\nSELECT * FROM no_such_table;',
    );
    await expect(migrate(url, dir)).rejects.toThrow(/99999999999999_broken/);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const { rowCount } = await c.query(`SELECT 1 FROM pg_tables WHERE tablename = 'half_done'`);
    const { rowCount: recorded } = await c.query(`SELECT 1 FROM baton_migrations WHERE name = '99999999999999_broken'`);
    await c.end();
    expect(rowCount).toBe(0);
    expect(recorded).toBe(0);
  });
});
