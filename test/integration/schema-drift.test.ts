import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as prismaSchema from '@prisma/prisma-schema-wasm';
import { useTestDatabaseClient } from '../support/test-database.ts';

/**
 * Holds the database our SQL migrations build against prisma/schema.prisma (parsed by
 * Prisma's own schema engine, compiled to WebAssembly): same tables, columns, types,
 * nullability, defaults, enums, primary keys, unique and plain indexes, and foreign keys
 * with their delete rules. `prisma migrate diff` would do this, but needs a binary that
 * cannot be downloaded here.
 */

interface DmmfField {
  name: string;
  dbName?: string | null;
  kind: 'scalar' | 'enum' | 'object';
  isList: boolean;
  isRequired: boolean;
  hasDefaultValue: boolean;
  type: string;
  nativeType: [string, string[]] | null;
  relationFromFields?: string[];
  relationToFields?: string[];
  relationOnDelete?: string;
}
interface DmmfModel {
  name: string;
  dbName: string | null;
  fields: DmmfField[];
}
interface Dmmf {
  datamodel: {
    models: DmmfModel[];
    enums: Array<{ name: string; dbName: string | null; values: Array<{ name: string; dbName: string | null }> }>;
    indexes: Array<{ model: string; type: 'id' | 'unique' | 'normal' | 'fulltext'; fields: Array<{ name: string }> }>;
  };
}

/** Tables Baton keeps outside the Prisma model on purpose. */
const OUTSIDE_THE_MODEL = new Set(['baton_migrations']);

const dmmf = JSON.parse(
  prismaSchema.get_dmmf(JSON.stringify({ prismaSchema: readFileSync(new URL('../../prisma/schema.prisma', import.meta.url), 'utf8') })),
) as Dmmf;
const enumDbName = new Map(dmmf.datamodel.enums.map((e) => [e.name, e.dbName ?? e.name]));
const tableOf = (m: DmmfModel) => m.dbName ?? m.name;
const columnOf = (f: DmmfField) => f.dbName ?? f.name;
const modelByName = new Map(dmmf.datamodel.models.map((m) => [m.name, m]));

function expectedType(f: DmmfField): string {
  const base = (() => {
    if (f.kind === 'enum') return enumDbName.get(f.type)!;
    const native = f.nativeType?.[0];
    switch (f.type) {
      case 'String':
        return native === 'Uuid' ? 'uuid' : 'text';
      case 'Int':
        return 'int4';
      case 'BigInt':
        return 'int8';
      case 'Boolean':
        return 'bool';
      case 'Float':
        return 'float8';
      case 'Json':
        return 'jsonb';
      case 'DateTime':
        return native === 'Timestamptz' ? `timestamptz(${f.nativeType?.[1][0] ?? 6})` : 'timestamp(3)';
      default:
        throw new Error(`type ${f.type} not mapped in the drift test`);
    }
  })();
  return f.isList ? `${base}[]` : base;
}

/**
 * The `where: raw("...")` of each partial @@index / @@unique in the schema (the DMMF leaves it
 * out), keyed like the index test's rows: `table type (columns)`.
 */
function partialIndexes(): Map<string, string> {
  const text = readFileSync(new URL('../../prisma/schema.prisma', import.meta.url), 'utf8');
  const found = new Map<string, string>();
  for (const block of text.matchAll(/^model (\w+) \{([\s\S]*?)^\}/gm)) {
    const model = modelByName.get(block[1]!)!;
    for (const ix of block[2]!.matchAll(/@@(index|unique)\(\[([^\]]*)\][^\n]*?where: raw\("([^"]*)"\)/g)) {
      const cols = ix[2]!.split(',').map((name) => columnOf(model.fields.find((f) => f.name === name.trim())!));
      found.set(`${tableOf(model)} ${ix[1] === 'index' ? 'normal' : 'unique'} (${cols.join(', ')})`, ix[3]!);
    }
  }
  return found;
}

/** A predicate as Postgres prints it back (pg_get_expr), by building a throwaway index with it. */
async function normalisedPredicate(table: string, columns: string[], where: string): Promise<string> {
  await db.client().query('BEGIN');
  try {
    await db.client().query(`CREATE INDEX drift_probe ON ${table} (${columns.join(', ')}) WHERE ${where}`);
    const { rows } = await db
      .client()
      .query<{ p: string }>(`SELECT pg_get_expr(indpred, indrelid) AS p FROM pg_index WHERE indexrelid = 'drift_probe'::regclass`);
    return rows[0]!.p;
  } finally {
    await db.client().query('ROLLBACK');
  }
}

const db = useTestDatabaseClient();

describe('the migrated database matches prisma/schema.prisma', () => {
  it('has exactly the tables of the model', async () => {
    const { rows } = await db.client().query<{ tablename: string }>(`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`);
    const actual = rows
      .map((r) => r.tablename)
      .filter((t) => !OUTSIDE_THE_MODEL.has(t))
      .sort();
    expect(actual).toEqual(dmmf.datamodel.models.map(tableOf).sort());
  });

  it('has exactly the enums of the model, values in order', async () => {
    const { rows } = await db.client().query<{ typname: string; labels: string[] }>(
      `SELECT t.typname::text AS typname, array_agg(e.enumlabel::text ORDER BY e.enumsortorder) AS labels
       FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid GROUP BY t.typname`,
    );
    const actual = Object.fromEntries(rows.map((r) => [r.typname, r.labels]));
    const expected = Object.fromEntries(dmmf.datamodel.enums.map((e) => [e.dbName ?? e.name, e.values.map((v) => v.dbName ?? v.name)]));
    expect(actual).toEqual(expected);
  });

  it('has every column with its type, nullability and whether it has a default, and no others', async () => {
    const { rows } = await db.client().query<{ table: string; column: string; type: string; nullable: boolean; hasDefault: boolean }>(
      `SELECT c.relname AS table, a.attname AS column,
         CASE WHEN t.typname IN ('timestamptz', 'timestamp', '_timestamptz') THEN
           replace(format_type(a.atttypid, a.atttypmod), 'timestamp(3) with time zone', 'timestamptz(3)')
         ELSE CASE WHEN t.typcategory = 'A' THEN substr(t.typname, 2) || '[]' ELSE t.typname END END AS type,
         NOT a.attnotnull AS nullable, a.atthasdef AS "hasDefault"
       FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_type t ON t.oid = a.atttypid
       WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped`,
    );
    const actual = rows
      .filter((r) => !OUTSIDE_THE_MODEL.has(r.table))
      .map(
        (r) =>
          `${r.table}.${r.column} ${r.type.replace('timestamp(3) without time zone', 'timestamp(3)')} ${r.nullable ? 'NULL' : 'NOT NULL'}${r.hasDefault ? ' DEFAULT' : ''}`,
      )
      .sort();
    const expected = dmmf.datamodel.models
      .flatMap((m) =>
        m.fields
          .filter((f) => f.kind !== 'object')
          .map(
            (f) =>
              `${tableOf(m)}.${columnOf(f)} ${expectedType(f)} ${f.isRequired ? 'NOT NULL' : 'NULL'}${f.hasDefaultValue ? ' DEFAULT' : ''}`,
          ),
      )
      .sort();
    expect(actual).toEqual(expected);
  });

  it('has exactly the primary keys, unique indexes and plain indexes of the model, partial ones with their predicates', async () => {
    const { rows } = await db
      .client()
      .query<{ table: string; unique: boolean; primary: boolean; columns: string[]; predicate: string | null }>(
        `SELECT t.relname AS table, i.indisunique AS unique, i.indisprimary AS primary,
         array_agg(a.attname::text ORDER BY k.ord) AS columns, pg_get_expr(i.indpred, i.indrelid) AS predicate
       FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
       CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
       JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
       WHERE n.nspname = 'public'
       GROUP BY t.relname, i.indexrelid, i.indisunique, i.indisprimary, i.indpred, i.indrelid`,
      );
    const actual = rows
      .filter((r) => !OUTSIDE_THE_MODEL.has(r.table))
      .map(
        (r) =>
          `${r.table} ${r.primary ? 'id' : r.unique ? 'unique' : 'normal'} (${r.columns.join(', ')})${r.predicate ? ` WHERE ${r.predicate}` : ''}`,
      )
      .sort();
    const partial = partialIndexes();
    const expected: string[] = [];
    for (const ix of dmmf.datamodel.indexes) {
      const model = modelByName.get(ix.model)!;
      const cols = ix.fields.map((f) => columnOf(model.fields.find((x) => x.name === f.name)!));
      const key = `${tableOf(model)} ${ix.type} (${cols.join(', ')})`;
      const where = partial.get(key);
      expected.push(where === undefined ? key : `${key} WHERE ${await normalisedPredicate(tableOf(model), cols, where)}`);
    }
    expect(partial.size).toBeGreaterThan(0);
    expect(actual).toEqual(expected.sort());
  });

  it('has exactly the foreign keys of the model, with their delete rules', async () => {
    const { rows } = await db.client().query<{ table: string; columns: string[]; ref: string; refColumns: string[]; onDelete: string }>(
      `SELECT c.conrelid::regclass::text AS table, c.confrelid::regclass::text AS ref,
         (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.conkey) WITH ORDINALITY k(n, ord) JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n) AS columns,
         (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.confkey) WITH ORDINALITY k(n, ord) JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n) AS "refColumns",
         c.confdeltype AS "onDelete"
       FROM pg_constraint c WHERE c.contype = 'f'`,
    );
    const rule: Record<string, string> = { a: 'NoAction', r: 'Restrict', c: 'Cascade', n: 'SetNull', d: 'SetDefault' };
    const actual = rows
      .map((r) => `${r.table}(${r.columns.join(', ')}) -> ${r.ref}(${r.refColumns.join(', ')}) ON DELETE ${rule[r.onDelete]}`)
      .sort();
    const expected = dmmf.datamodel.models
      .flatMap((m) =>
        m.fields
          .filter((f) => f.kind === 'object' && f.relationFromFields && f.relationFromFields.length > 0)
          .map((f) => {
            const target = modelByName.get(f.type)!;
            const from = f.relationFromFields!.map((n) => columnOf(m.fields.find((x) => x.name === n)!));
            const to = f.relationToFields!.map((n) => columnOf(target.fields.find((x) => x.name === n)!));
            return `${tableOf(m)}(${from.join(', ')}) -> ${tableOf(target)}(${to.join(', ')}) ON DELETE ${f.relationOnDelete ?? (f.isRequired ? 'Restrict' : 'SetNull')}`;
          }),
      )
      .sort();
    expect(actual).toEqual(expected);
  });
});
