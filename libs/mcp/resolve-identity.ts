import { BatonError } from '../domain/errors.ts';
import type { McpIdentity } from './tool-context.ts';

/** Who a token is, as `GET /v1/whoami` (or the API's own authentication) says. */
export interface TokenOwner {
  readonly tokenId: string;
  readonly admin: boolean;
  /** The agent an agent token belongs to; null for an admin token. */
  readonly agent: string | null;
  readonly project: string;
}

/**
 * The identity an MCP session is fixed to: an agent token's own agent (naming another is
 * `identity_mismatch`), or the agent an admin token names when the session starts (`baton mcp
 * --as`, BATON_AGENT, or the `X-Baton-Agent` header on `/mcp`). An admin token that names
 * none is refused (`forbidden`): every tool acts as one agent, and an admin is none.
 * @throws BatonError identity_mismatch, forbidden
 */
export function resolveIdentity(owner: TokenOwner, named: string | undefined, how: { nameWith: string }): McpIdentity {
  const wanted = named?.toLowerCase();
  if (owner.agent !== null) {
    if (wanted !== undefined && wanted !== owner.agent) {
      throw new BatonError(
        'identity_mismatch',
        `this token belongs to ${owner.agent}; it cannot act as ${wanted} (leave ${how.nameWith} out, or use ${wanted}'s token)`,
      );
    }
    return { agent: owner.agent, admin: false, project: owner.project, tokenId: owner.tokenId };
  }
  if (wanted === undefined) {
    throw new BatonError(
      'forbidden',
      `an admin token acts for no agent, and every Baton MCP tool acts as one: name it with ${how.nameWith}, or better give the session that agent's own token (baton token create --agent <agent> --profile <file>)`,
    );
  }
  return { agent: wanted, admin: true, project: owner.project, tokenId: owner.tokenId };
}
