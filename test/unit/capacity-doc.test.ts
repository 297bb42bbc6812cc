import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { sizingTable } from '../../services/bench/capacity-sizing.ts';

describe('docs/CAPACITY.md', () => {
  it('holds the sizing table fleetCapacity computes from the costs it states (services/bench/capacity-sizing.ts)', () => {
    const doc = readFileSync('docs/CAPACITY.md', 'utf8');
    const table = sizingTable();
    expect(doc.includes(table), `docs/CAPACITY.md should contain:\n${table}`).toBe(true);
  });
});
