import type { ApiClient } from '../cli/api-client.ts';

/**
 * Who an MCP session is, fixed before its first tool call: from the token at `baton mcp`
 * start (stdio), or from each request's bearer token (`/mcp`). Tools never take it from their
 * arguments.
 */
export interface McpIdentity {
  /** The agent every tool acts as. */
  readonly agent: string;
  /** An admin token acting for `agent` (named at start); its reads use `all_owners`. */
  readonly admin: boolean;
  readonly project: string;
  readonly tokenId: string;
}

/** What every tool is given: Baton's HTTP API (never Postgres or Redis) and the fixed identity. */
export interface ToolContext {
  readonly api: Pick<ApiClient, 'request' | 'get' | 'post' | 'postIdempotent'>;
  readonly identity: McpIdentity;
}

/** The path of handoff `id`, or of one of its actions. */
export const handoffPath = (id: string, action = '') => `/v1/handoffs/${encodeURIComponent(id)}${action ? `/${action}` : ''}`;

/**
 * The body fields that name the actor: nothing for an agent token (the API uses the token's
 * agent), the fixed agent for an admin token. Never taken from a tool's arguments.
 */
export function actor(ctx: ToolContext, field: 'as' | 'from' = 'as'): Record<string, string> {
  return ctx.identity.admin ? { [field]: ctx.identity.agent } : {};
}

/**
 * An admin acting for an agent sees that agent's owned handoffs only with `all_owners`
 * (docs/API.md, visibility); an agent token never sends it.
 */
export function visible(ctx: ToolContext, path: string): string {
  if (!ctx.identity.admin) return path;
  return `${path}${path.includes('?') ? '&' : '?'}all_owners=true`;
}
