import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../libs/db/open-database.ts';
import { prepared } from '../../libs/db/prepared.ts';
import { KeptRowQuery, rowTemplatesBuilt } from '../../libs/db/row-templates.ts';
import { createTestDatabase } from '../support/test-database.ts';
import { silentLogger } from '../support/test-baton.ts';

/**
 * Named statements' rows through the kept row templates (libs/db/row-templates.ts): the same
 * rows pg itself gives, on the pool (callback) and on a transaction's client (promise), after a
 * statement of the same name comes back with other columns, and with pg's Result still built
 * the way the templates rely on.
 */

let test: Awaited<ReturnType<typeof createTestDatabase>>;
let db: Database;
let other: Database;

beforeAll(async () => {
  test = await createTestDatabase();
  db = openDatabase({ url: test.url, poolSize: 2, logger: silentLogger() });
  other = openDatabase({ url: test.url, poolSize: 1, logger: silentLogger() });
});

afterAll(async () => {
  await db?.close();
  await other?.close();
  await test?.drop();
});

const WIDE = `SELECT $1::int8 AS big, now() AS at, '{"a":[1,2]}'::jsonb AS doc, ARRAY['x','y']::text[] AS list, NULL::text AS nothing,
  'c'::text AS "constructor", 't'::text AS "toString", 1.5::float8 AS ratio, true AS yes, $2::text AS said, g AS n
  FROM generate_series(1, 3) g`;

describe('kept row templates', () => {
  it('gives the rows pg gives, the first time and every time after, on the pool and in a transaction', async () => {
    const plain = await db.pool.query({ text: WIDE, values: [42n, 'hi'] });
    const before = rowTemplatesBuilt();
    const first = await prepared(db.pool, WIDE, [42n, 'hi']);
    const again = await prepared(db.pool, WIDE, [7n, 'there']);
    expect(rowTemplatesBuilt()).toBe(before + 1);
    const strip = (rows: Record<string, unknown>[]) => rows.map(({ at: _at, ...r }) => r);
    expect(strip(first.rows)).toEqual(strip(plain.rows));
    expect(first.rows[0]!['at']).toBeInstanceOf(Date);
    expect(first.rows[0]!['big']).toBe(42n);
    expect(again.rows.map((r) => [r['big'], r['said'], r['n']])).toEqual([
      [7n, 'there', 1],
      [7n, 'there', 2],
      [7n, 'there', 3],
    ]);
    // Rows are objects of their own: changing one changes no other, nor the next result.
    first.rows[0]!['said'] = 'changed';
    expect(first.rows[1]!['said']).toBe('hi');
    expect((await prepared(db.pool, WIDE, [1n, 'x'])).rows[0]!['said']).toBe('x');
    expect(Object.keys(again.rows[0]!)).toEqual(Object.keys(plain.rows[0]));
    expect(again.fields.map((f) => f.name)).toEqual(plain.fields.map((f) => f.name));

    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const inside = await prepared(client, WIDE, [5n, 'tx']);
      await client.query('COMMIT');
      expect(inside.rows.map((r) => r['big'])).toEqual([5n, 5n, 5n]);
    } finally {
      client.release();
    }
  });

  it('builds a template once per pooled connection, however often the pool hands out another one', async () => {
    const pool = openDatabase({ url: test.url, poolSize: 4, logger: silentLogger() });
    try {
      const text = `SELECT $1::int AS n, now() AS at, 'kept-per-connection'::text AS what`;
      const before = rowTemplatesBuilt();
      for (let round = 0; round < 25; round++) {
        // Four at once keep every connection busy, so each round spreads over all of them.
        const results = await Promise.all([0, 1, 2, 3].map((i) => prepared(pool.pool, text, [round * 4 + i])));
        expect(results.map((r) => r.rows[0]!['n'])).toEqual([0, 1, 2, 3].map((i) => round * 4 + i));
      }
      expect(rowTemplatesBuilt() - before).toBeLessThanOrEqual(4);
    } finally {
      await pool.close();
    }
  });

  it('takes values given beside a named statement, as pg does', async () => {
    const res = await db.pool.query({ name: 'baton_row_templates_values', text: 'SELECT $1::text AS v' }, ['beside']);
    expect(res.rows).toEqual([{ v: 'beside' }]);
    const client = await db.pool.connect();
    try {
      expect((await client.query({ name: 'baton_row_templates_values', text: 'SELECT $1::text AS v' }, ['client'])).rows).toEqual([
        { v: 'client' },
      ]);
    } finally {
      client.release();
    }
  });

  it('takes the columns pg describes when a statement of the same name has other columns', async () => {
    const name = 'baton_row_templates_test';
    await db.pool.query({ name, text: 'SELECT 1 AS a, 2 AS b' });
    // The same name prepared elsewhere (another process, or after a schema change) with other columns.
    const res = await other.pool.query({ name, text: "SELECT 'x'::text AS c" });
    expect(res.rows).toEqual([{ c: 'x' }]);
    const back = await db.pool.query({ name, text: 'SELECT 1 AS a, 2 AS b' });
    expect(back.rows).toEqual([{ a: 1, b: 2 }]);
  });

  it("fails a named statement as pg does (the pool and a client both reject with Postgres's error)", async () => {
    await expect(prepared(db.pool, 'SELECT 1/$1::int AS x', [0])).rejects.toMatchObject({ code: '22012' });
    const client = await db.pool.connect();
    try {
      await expect(prepared(client, 'SELECT nope FROM nowhere', [])).rejects.toMatchObject({ code: '42P01' });
      expect((await client.query('SELECT 1 AS ok')).rows).toEqual([{ ok: 1 }]);
    } finally {
      client.release();
    }
  });

  it('relies on pg as it is: Query keeps its result in _result, and addFields sets only fields, _parsers and _prebuiltEmptyResultObject', () => {
    const query = new KeptRowQuery({ name: 'x', text: 'SELECT 1' });
    expect((query as unknown as { _result: unknown })._result).toBeInstanceOf(pg.Result);
    const result = new (pg.Result as unknown as new () => Record<string, unknown> & { addFields(f: unknown[]): void })();
    const before = { ...result };
    result.addFields([{ name: 'a', dataTypeID: 23, format: 'text' }]);
    const changed = Object.keys(result).filter((k) => result[k] !== before[k]);
    expect(changed.sort()).toEqual(['_parsers', '_prebuiltEmptyResultObject', 'fields']);
  });
});
