// Prints the error table of docs/ERRORS.md from libs/domain/errors.ts; with --write, replaces it.
import { readFileSync, writeFileSync } from 'node:fs';
import { ERROR_CATALOG } from '../libs/domain/errors.ts';

const header = '| code | HTTP | retryable | meaning |\n| --- | --- | --- | --- |';
const rows = Object.entries(ERROR_CATALOG).map(([code, e]) => `| \`${code}\` | ${e.status} | ${e.retryable ? 'yes' : 'no'} | ${e.summary} |`);
const table = `${header}\n${rows.join('\n')}\n`;
if (process.argv.includes('--write')) {
  const file = new URL('../docs/ERRORS.md', import.meta.url);
  const doc = readFileSync(file, 'utf8');
  const start = doc.indexOf(header);
  const end = doc.indexOf('\n\n', start);
  if (start < 0 || end < 0) throw new Error('error table not found in docs/ERRORS.md');
  writeFileSync(file, `${doc.slice(0, start)}${table}${doc.slice(end + 1)}`);
} else {
  process.stdout.write(table);
}
