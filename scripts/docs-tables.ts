// Prints the generated tables of docs/ERRORS.md (from libs/domain/errors.ts), docs/API.md
// (from libs/domain/limits.ts and libs/domain/a2a-task-states.ts) and libs/config/README.md (from libs/config/component-defaults.ts);
// with --write, replaces them in the docs.
import { readFileSync, writeFileSync } from 'node:fs';
import { ERROR_CATALOG } from '../libs/domain/errors.ts';
import { LIMIT_DOCS, LIMITS } from '../libs/domain/limits.ts';
import { COMPONENT_DEFAULTS_HEADER, componentDefaultsRows } from './config-tables.ts';
import { A2A_TASK_TABLE_HEADER, a2aTaskTableRows } from '../libs/domain/a2a-task-states.ts';

const tables = [
  {
    doc: '../docs/ERRORS.md',
    header: '| code | HTTP | retryable | meaning |\n| --- | --- | --- | --- |',
    rows: Object.entries(ERROR_CATALOG).map(([code, e]) => `| \`${code}\` | ${e.status} | ${e.retryable ? 'yes' : 'no'} | ${e.summary} |`),
  },
  {
    doc: '../docs/API.md',
    header: '| limit | value | bounds |\n| --- | --- | --- |',
    rows: Object.entries(LIMITS).map(([name, value]) => `| \`${name}\` | ${value} | ${LIMIT_DOCS[name as keyof typeof LIMITS]} |`),
  },
  { doc: '../docs/API.md', header: A2A_TASK_TABLE_HEADER, rows: a2aTaskTableRows() },
  { doc: '../libs/config/README.md', header: COMPONENT_DEFAULTS_HEADER, rows: componentDefaultsRows() },
];

for (const { doc, header, rows } of tables) {
  const table = `${header}\n${rows.join('\n')}\n`;
  if (!process.argv.includes('--write')) {
    process.stdout.write(`${doc}\n${table}\n`);
    continue;
  }
  const file = new URL(doc, import.meta.url);
  const text = readFileSync(file, 'utf8');
  const start = text.indexOf(header);
  const end = text.indexOf('\n\n', start);
  if (start < 0 || end < 0) throw new Error(`the generated table was not found in ${doc}`);
  writeFileSync(file, `${text.slice(0, start)}${table}${text.slice(end + 1)}`);
}
