import { readFileSync } from 'node:fs';
import * as prismaSchema from '@prisma/prisma-schema-wasm';
import { describe, expect, it } from 'vitest';
import { ATTEMPT_FIELDS, columnOf, EVENT_FIELDS, HANDOFF_FIELDS, handoffColumns, LEFT_OUT } from '../../libs/db/handoff-sql/columns.ts';

/**
 * The handoff statements' column lists (libs/db/handoff-sql/columns.ts) are the one place raw SQL
 * names the columns of handoffs, delivery_attempts and handoff_events. Held here against
 * prisma/schema.prisma, parsed by Prisma's own schema engine (as schema-drift.test.ts does):
 * a renamed, added or removed column fails this test, not a statement at run time.
 */

interface DmmfField {
  name: string;
  dbName?: string | null;
  kind: 'scalar' | 'enum' | 'object' | 'unsupported';
}
interface DmmfModel {
  name: string;
  dbName: string | null;
  fields: DmmfField[];
}

const schema = readFileSync(new URL('../../prisma/schema.prisma', import.meta.url), 'utf8');
const dmmf = JSON.parse(prismaSchema.get_dmmf(JSON.stringify({ prismaSchema: schema }))) as { datamodel: { models: DmmfModel[] } };

/** The model's stored fields (scalars and enums, not relations): field name → column. */
function storedFields(model: string): Map<string, string> {
  const m = dmmf.datamodel.models.find((x) => x.name === model);
  if (!m) throw new Error(`no model ${model} in schema.prisma`);
  return new Map(m.fields.filter((f) => f.kind !== 'object').map((f) => [f.name, f.dbName ?? f.name]));
}

const LISTS = [
  { model: 'Handoff', fields: HANDOFF_FIELDS },
  { model: 'DeliveryAttempt', fields: ATTEMPT_FIELDS },
  { model: 'HandoffEvent', fields: EVENT_FIELDS },
] as const;

describe('the handoff statements select the columns schema.prisma declares', () => {
  for (const { model, fields } of LISTS) {
    it(`${model}: each listed field is a column of the model, stored where its name says`, () => {
      const stored = storedFields(model);
      const listed = fields.flat();
      expect(listed.filter((f) => stored.get(f) !== columnOf(f))).toEqual([]);
      expect(new Set(listed).size).toBe(listed.length);
    });

    it(`${model}: every column of the model is selected or left out on purpose`, () => {
      const listed = new Set<string>(fields.flat());
      const unlisted = [...storedFields(model).keys()].filter((f) => !listed.has(f));
      expect(unlisted.sort()).toEqual([...LEFT_OUT[model]].sort());
    });
  }

  it('selects each handoff column under its field name', () => {
    const text = handoffColumns('h');
    expect(text).toContain('h.recipient_generation AS "recipientGeneration"');
    expect(text).toContain('h.created_by_token_id AS "createdByTokenId"');
    expect(text).toMatch(/h\.seq,/);
  });
});
