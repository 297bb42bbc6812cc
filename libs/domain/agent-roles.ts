import { BatonError } from './errors.ts';
import { LIMITS } from './limits.ts';

/**
 * A role an agent declares (`reviewer`, `frontend`, `oncall`): letters, digits, '-' and '_',
 * starting with a letter or digit, at most LIMITS.role characters. Case-insensitive like agent
 * ids: Baton stores and shows roles lower-case.
 */
export const ROLE_PATTERN = `^[A-Za-z0-9][A-Za-z0-9_-]{0,${LIMITS.role - 1}}$`;
const ROLE_RE = new RegExp(ROLE_PATTERN);

/**
 * The roles as given, checked and normalised: each a string matching ROLE_PATTERN, at most
 * LIMITS.agentRoles of them; lower-cased, duplicates dropped, sorted (so two registrations
 * that name the same roles store the same list).
 * @throws BatonError invalid_role (the message names the offending entry)
 */
export function checkRoles(input: unknown): string[] {
  if (!Array.isArray(input)) throw new BatonError('invalid_role', 'roles must be a list of role names');
  const roles = input.map((r, i) => {
    if (typeof r !== 'string' || !ROLE_RE.test(r)) {
      throw new BatonError(
        'invalid_role',
        `roles/${i} ${JSON.stringify(r)} is not a role name: letters, digits, '-' and '_', starting with a letter or digit, at most ${LIMITS.role} characters`,
      );
    }
    return r.toLowerCase();
  });
  const unique = [...new Set(roles)].sort();
  if (unique.length > LIMITS.agentRoles) {
    throw new BatonError('invalid_role', `an agent may declare at most ${LIMITS.agentRoles} roles (${unique.length} given)`);
  }
  return unique;
}
