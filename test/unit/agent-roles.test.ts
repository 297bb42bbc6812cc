import { describe, expect, it } from 'vitest';
import { checkRoles } from '../../libs/domain/agent-roles.ts';
import { BatonError } from '../../libs/domain/errors.ts';
import { LIMITS } from '../../libs/domain/limits.ts';

const codeOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (err) {
    return err instanceof BatonError ? err.code : 'not a BatonError';
  }
  return undefined;
};

describe('checkRoles', () => {
  it('lower-cases, drops duplicates and sorts, so equal declarations store equal lists', () => {
    expect(checkRoles(['Reviewer', 'oncall', 'REVIEWER', 'front-end_2'])).toEqual(['front-end_2', 'oncall', 'reviewer']);
    expect(checkRoles([])).toEqual([]);
  });

  it('refuses what is not a role name with invalid_role', () => {
    for (const bad of [['has space'], ['-lead'], [''], ['x'.repeat(LIMITS.role + 1)], ['role:reviewer'], [7], 'reviewer']) {
      expect(
        codeOf(() => checkRoles(bad)),
        JSON.stringify(bad),
      ).toBe('invalid_role');
    }
    expect(checkRoles(['x'.repeat(LIMITS.role)])).toHaveLength(1);
  });

  it('refuses more than LIMITS.agentRoles distinct roles, counting after duplicates are dropped', () => {
    const many = Array.from({ length: LIMITS.agentRoles + 1 }, (_, i) => `r${i}`);
    expect(codeOf(() => checkRoles(many))).toBe('invalid_role');
    expect(checkRoles([...many.slice(0, LIMITS.agentRoles), 'R0'])).toHaveLength(LIMITS.agentRoles);
  });
});
