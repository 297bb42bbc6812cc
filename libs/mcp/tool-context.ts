import type { ApiClient } from '../api-client/api-client.ts';

/**
 * Who an MCP session is, fixed before its first tool call: from the token at `baton mcp`
 * start (stdio), or from each request's bearer token (`/mcp`). Tools never take it from their
 * arguments.
 */
export interface McpIdentity {
  /** The agent every tool acts as. */
  readonly agent: string;
  /** An admin token acting for `agent` (named at start): every call names it (`X-Baton-Agent`), and reads see what the agent sees. */
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
 * The context of an MCP session: for an admin token acting for an agent, every call carries
 * `X-Baton-Agent`, so the API shows it exactly what that agent sees (never `all_owners`: the
 * model in the session must not read other pairs' private handoffs; an operator who wants more
 * uses the CLI or HTTP).
 */
export function toolContext(api: ApiClient, identity: McpIdentity): ToolContext {
  return { api: identity.admin ? api.withHeaders({ 'x-baton-agent': identity.agent }) : api, identity };
}
