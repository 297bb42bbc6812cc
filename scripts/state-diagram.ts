// Prints the delivery state diagram (Mermaid) generated from libs/domain/transitions.ts;
// with --write, replaces the copy in libs/handoffs/README.md.
import { readFileSync, writeFileSync } from 'node:fs';
import { renderStateDiagram } from '../libs/domain/state-diagram.ts';

const block = ['```mermaid', renderStateDiagram(), '```'].join('\n');
if (process.argv.includes('--write')) {
  const file = new URL('../libs/handoffs/README.md', import.meta.url);
  const readme = readFileSync(file, 'utf8');
  const [before, rest] = readme.split('<!-- state-diagram:start -->');
  const after = rest?.split('<!-- state-diagram:end -->')[1];
  if (before === undefined || after === undefined) throw new Error('state-diagram markers not found in libs/handoffs/README.md');
  writeFileSync(file, `${before}<!-- state-diagram:start -->\n${block}\n<!-- state-diagram:end -->${after}`);
} else {
  process.stdout.write(`${block}\n`);
}
