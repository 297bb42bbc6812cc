import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderStateDiagram } from '../../libs/domain/state-diagram.ts';
import { transitionEdges } from '../../libs/domain/transitions.ts';

describe('the state diagram in libs/handoffs/README.md', () => {
  const readme = readFileSync(new URL('../../libs/handoffs/README.md', import.meta.url), 'utf8');
  const block = readme.split('<!-- state-diagram:start -->')[1]?.split('<!-- state-diagram:end -->')[0] ?? '';

  it('is exactly the diagram generated from the transition table', () => {
    expect(block.trim()).toBe(['```mermaid', renderStateDiagram(), '```'].join('\n'));
  });

  it('shows every edge of the table once', () => {
    for (const e of transitionEdges()) {
      const line = `${e.from ?? '[*]'} --> ${e.to}: ${e.event} `;
      expect(block.split(line).length - 1, line).toBe(1);
    }
  });
});
