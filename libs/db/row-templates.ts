import pg from 'pg';
import { STATEMENT_CACHE_DEFAULTS } from '../config/component-defaults.ts';

/**
 * Rows of named prepared statements without pg's per-result set-up. For every result pg builds
 * a template row and looks up a parser per column, which for a wide row costs more than parsing
 * the row itself (docs/performance-history.md, "Kept statement texts and row templates"). A
 * named statement's columns are the same on every call, so the first result's template and
 * parsers are kept per statement name and reused while the columns pg describes are the same
 * (names, types and formats compared: a statement prepared again after a schema change gets a
 * template of its own). They are kept per client's type parsers (pg gives every client its
 * own), so each pooled connection builds a statement's template once (a type parser set on a
 * client after that would not be seen: Baton sets none).
 *
 * pg exposes no hook for this: `KeptRowQuery` is pg's own Query whose result takes its fields
 * from the kept template (the Result members it sets are those pg's `addFields` sets;
 * test/integration/row-templates.test.ts fails if a pg upgrade changes them).
 */

interface FieldDescription {
  readonly name: string;
  readonly dataTypeID: number;
  readonly format?: string;
}

/** The parts of pg's Result that `addFields` sets and `parseRow` reads. */
interface ResultFields {
  fields: FieldDescription[];
  _parsers: Array<(value: string) => unknown>;
  _prebuiltEmptyResultObject: Record<string, null>;
  _types?: { getTypeParser(oid: number, format: string): (value: string) => unknown };
  addFields(fields: FieldDescription[]): void;
}

interface RowTemplate {
  readonly fields: readonly FieldDescription[];
  readonly parsers: ResultFields['_parsers'];
  readonly row: Record<string, null>;
}

/**
 * Templates kept per client's type parsers, then per statement name; a process has a few hundred
 * statements (STATEMENT_CACHE_DEFAULTS.rowTemplates bounds a surprise). A client that is gone takes its templates along.
 */
const byTypes = new WeakMap<object, Map<string, RowTemplate>>();
const untyped = new Map<string, RowTemplate>();
let built = 0;

function sameFields(a: readonly FieldDescription[], b: readonly FieldDescription[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.name !== y.name || x.dataTypeID !== y.dataTypeID || x.format !== y.format) return false;
  }
  return true;
}

function keptFor(types: object): Map<string, RowTemplate> {
  let templates = byTypes.get(types);
  if (!templates) {
    templates = new Map();
    byTypes.set(types, templates);
  }
  return templates;
}

function templateFor(name: string, fields: FieldDescription[], types: ResultFields['_types']): RowTemplate {
  const templates = types ? keptFor(types) : untyped;
  const kept = templates.get(name);
  if (kept && sameFields(kept.fields, fields)) return kept;
  built++;
  const source = types ?? pg.types;
  const parsers = fields.map((f) => source.getTypeParser(f.dataTypeID, (f.format ?? 'text') as 'text') as (value: string) => unknown);
  // As pg makes it: keys from a prototype-less object, so a column named like an Object.prototype member is a plain key.
  const keys = Object.create(null) as Record<string, null>;
  for (const f of fields) keys[f.name] = null;
  const template: RowTemplate = { fields, parsers, row: { ...keys } };
  if (kept || templates.size < STATEMENT_CACHE_DEFAULTS.rowTemplates) templates.set(name, template);
  return template;
}

/** pg's Query for a named statement whose result reuses the statement's kept row template. */
export class KeptRowQuery extends pg.Query {
  constructor(config: pg.QueryConfig & { name: string }) {
    super(config);
    const name = config.name;
    const result = (this as unknown as { _result: ResultFields })._result;
    result.addFields = function (this: ResultFields, fields: FieldDescription[]) {
      const t = templateFor(name, fields, this._types);
      this.fields = fields;
      this._parsers = t.parsers;
      this._prebuiltEmptyResultObject = t.row;
    };
  }
}

/** For tests: how many templates were built so far (a kept one is not built again). */
export function rowTemplatesBuilt(): number {
  return built;
}
