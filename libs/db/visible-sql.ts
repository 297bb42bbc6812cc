import type { Viewer } from '../domain/visibility.ts';

/**
 * `canSee` (libs/domain/visibility.ts) as a SQL condition on the handoff alias, appending its
 * parameters to `params`. The two must stay the same rule: test/integration/visibility.test.ts
 * checks lists, counts, the board and direct reads against each other.
 */
export function visibleSql(v: Viewer, params: unknown[], alias = 'h'): string {
  if (v.allOwners) return 'true';
  params.push(v.agentId, v.tokenId);
  const agent = `$${params.length - 1}::uuid`;
  const token = `$${params.length}::uuid`;
  return `((${alias}.recipient_id IS NULL AND ${alias}.recipient_role IS NULL) OR ${alias}.sender_id = ${agent} OR ${alias}.recipient_id = ${agent} OR ${alias}.created_by_token_id = ${token})`;
}
