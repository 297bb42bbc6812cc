import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderStateDiagram, renderWorkStateDiagram } from '../../libs/domain/state-diagram.ts';
import { moveWorkEdges } from '../../libs/domain/work-states.ts';
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

describe('the work state diagram in libs/handoffs/README.md', () => {
  const readme = readFileSync(new URL('../../libs/handoffs/README.md', import.meta.url), 'utf8');
  const block = readme.split('<!-- work-state-diagram:start -->')[1]?.split('<!-- work-state-diagram:end -->')[0] ?? '';

  it('is exactly the diagram generated from the work transition table', () => {
    expect(block.trim()).toBe(['```mermaid', renderWorkStateDiagram(), '```'].join('\n'));
  });

  it('shows every (from, event, to) of the table once, with its actors', () => {
    const seen = new Set<string>();
    for (const e of moveWorkEdges()) {
      const line = `    ${e.from} --> ${e.to}: ${e.event} (`;
      if (seen.has(line)) continue;
      seen.add(line);
      expect(block.split(line).length - 1, line).toBe(1);
      expect(
        block.split('\n').find((l) => l.startsWith(line)),
        line,
      ).toContain(e.actor);
    }
  });
});
