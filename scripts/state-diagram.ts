// Prints the delivery and work state diagrams (Mermaid) generated from libs/domain/transitions.ts
// and libs/domain/work-states.ts; with --write, replaces their copies in libs/handoffs/README.md.
import { readFileSync, writeFileSync } from 'node:fs';
import { renderStateDiagram, renderWorkStateDiagram } from '../libs/domain/state-diagram.ts';

const blocks = {
  'state-diagram': ['```mermaid', renderStateDiagram(), '```'].join('\n'),
  'work-state-diagram': ['```mermaid', renderWorkStateDiagram(), '```'].join('\n'),
};
if (process.argv.includes('--write')) {
  const file = new URL('../libs/handoffs/README.md', import.meta.url);
  let readme = readFileSync(file, 'utf8');
  for (const [name, block] of Object.entries(blocks)) {
    const [before, rest] = readme.split(`<!-- ${name}:start -->`);
    const after = rest?.split(`<!-- ${name}:end -->`)[1];
    if (before === undefined || after === undefined) throw new Error(`${name} markers not found in libs/handoffs/README.md`);
    readme = `${before}<!-- ${name}:start -->\n${block}\n<!-- ${name}:end -->${after}`;
  }
  writeFileSync(file, readme);
} else {
  process.stdout.write(`${blocks['state-diagram']}\n\n${blocks['work-state-diagram']}\n`);
}
