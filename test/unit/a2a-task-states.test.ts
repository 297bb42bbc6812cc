import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DELIVERY_STATES } from '../../libs/domain/delivery-states.ts';
import { WORK_STATES, type WorkState } from '../../libs/domain/work-states.ts';
import {
  A2A_TASK_RULES,
  A2A_TASK_TABLE_HEADER,
  a2aTaskRule,
  a2aTaskTableRows,
  protocolStateName,
} from '../../libs/domain/a2a-task-states.ts';

const WORKS: Array<WorkState | null> = [null, ...WORK_STATES];

describe('the A2A task state table', () => {
  it('gives every delivery × work state one task state, and every row is reached', () => {
    const reached = new Set<number>();
    for (const d of DELIVERY_STATES) {
      for (const w of WORKS) {
        const rule = a2aTaskRule(d, w);
        reached.add(A2A_TASK_RULES.indexOf(rule));
        expect(rule.note.length).toBeGreaterThan(0);
      }
    }
    expect([...reached].sort((a, b) => a - b)).toEqual(A2A_TASK_RULES.map((_, i) => i));
  });

  it('never calls an UNCERTAIN handoff completed: it is working, with a note saying the outcome is being checked', () => {
    for (const w of WORKS.filter((s) => s !== 'cancelled' && s !== 'expired')) {
      const rule = a2aTaskRule('UNCERTAIN', w);
      expect(rule.state).toBe('working');
      expect(rule.note).toContain('outcome is being checked');
    }
    for (const w of WORKS) expect(a2aTaskRule('UNCERTAIN', w).state).not.toBe('completed');
  });

  it('maps the usual paths', () => {
    expect(a2aTaskRule('WAITING', null).state).toBe('submitted');
    expect(a2aTaskRule('RUNNING', null).state).toBe('working');
    expect(a2aTaskRule('RETURNED', null).state).toBe('completed');
    expect(a2aTaskRule('RETURNED', 'returned').state).toBe('input-required');
    expect(a2aTaskRule('RETURNED', 'closed').state).toBe('completed');
    expect(a2aTaskRule('CANCELLED', null).state).toBe('canceled');
    expect(a2aTaskRule('WAITING', 'cancelled').state).toBe('canceled');
    expect(a2aTaskRule('FAILED', null).state).toBe('failed');
    expect(a2aTaskRule('UNAVAILABLE', 'expired').state).toBe('failed');
    expect(a2aTaskRule('UNAVAILABLE', null).state).toBe('rejected');
    expect(protocolStateName('input-required')).toBe('TASK_STATE_INPUT_REQUIRED');
  });

  it('is the table docs/API.md shows (npm run docs-tables -- --write)', () => {
    const doc = readFileSync(new URL('../../docs/API.md', import.meta.url), 'utf8');
    expect(doc).toContain(`${A2A_TASK_TABLE_HEADER}\n${a2aTaskTableRows().join('\n')}\n\n`);
  });
});
