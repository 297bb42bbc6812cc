import type { FastifyRequest } from 'fastify';
import { BatonError } from '../../libs/domain/errors.ts';
import type { Caller } from '../../libs/handoffs/caller.ts';
import type { CoreDeps } from '../../libs/handoffs/ports.ts';
import type { Viewer } from '../../libs/domain/visibility.ts';
import { LIMITS } from '../../libs/domain/limits.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth plugin on every /v1 request. */
    caller?: Caller;
    /** An admin's request naming an agent with X-Baton-Agent: reads show what that agent sees (set by the auth plugin). */
    viewAs?: { readonly id: string; readonly handle: string };
  }
}

/**
 * What every /v1 route plugin is given: `core`, the process's bag, typed as what the plugin's
 * use cases touch (`D`). A plugin of one or two use cases names them (`RouteOptions<LiveViewDeps>`);
 * one that serves a whole area (agents, handoffs, work) takes the bag, and each use case's own
 * signature says what it touches.
 */
export interface RouteOptions<D = CoreDeps> {
  readonly core: D;
  readonly defaultProject: string;
}

export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw new BatonError('unauthenticated', 'no caller on this request');
  return request.caller;
}

/**
 * The project a request acts in. An agent token's project is fixed (a header naming another
 * one is refused, whether or not it exists); an admin picks one with X-Baton-Project, or gets
 * the default. `inQuery`: a route's `?project=`, the same choice for a client that cannot set
 * headers (a browser's EventSource); with the header too, the two must agree.
 * @throws BatonError forbidden, validation_failed
 */
export function projectOf(request: FastifyRequest, defaultProject: string, inQuery?: string): string {
  const caller = callerOf(request);
  const header = request.headers['x-baton-project'];
  const fromHeader = typeof header === 'string' && header !== '' ? header.toLowerCase() : undefined;
  const fromQuery = inQuery === undefined || inQuery === '' ? undefined : inQuery.toLowerCase();
  if (fromHeader !== undefined && fromQuery !== undefined && fromHeader !== fromQuery) {
    throw new BatonError(
      'validation_failed',
      `X-Baton-Project names ${JSON.stringify(fromHeader)} and ?project= ${JSON.stringify(fromQuery)}: name one project`,
    );
  }
  const named = fromHeader ?? fromQuery;
  if (caller.projectSlug !== null) {
    if (named !== undefined && named !== caller.projectSlug) {
      throw new BatonError('forbidden', `this token is bound to project ${caller.projectSlug}; it cannot act in ${JSON.stringify(named)}`);
    }
    return caller.projectSlug;
  }
  return named ?? defaultProject;
}

/**
 * The agent a request acts as: an agent token's own agent (naming any other is refused), or,
 * for an admin token, the agent it names.
 * @throws BatonError identity_mismatch, validation_failed (an admin named no agent)
 */
export function actingAs(request: FastifyRequest, named: string | undefined, field = 'as'): string {
  const caller = callerOf(request);
  if (caller.agent) {
    if (named !== undefined && named.toLowerCase() !== caller.agent.handle) {
      throw new BatonError('identity_mismatch', `this token belongs to ${caller.agent.handle}; it cannot act as ${named.toLowerCase()}`);
    }
    return caller.agent.handle;
  }
  if (named === undefined) {
    throw new BatonError(
      'validation_failed',
      `an admin token acts for no agent: name the one to act as in body/${field} (the CLI: --as <agent>, or BATON_AGENT)`,
    );
  }
  return named.toLowerCase();
}

/** Who acts and with which token, for a use case: `{ as, tokenId }` (see `actingAs`). */
export function actorOf(request: FastifyRequest, named: string | undefined): { as: string; tokenId: string } {
  return { as: actingAs(request, named), tokenId: callerOf(request).tokenId };
}

/** @throws BatonError forbidden unless the token is an admin token */
export function requireAdmin(request: FastifyRequest): Caller {
  const caller = callerOf(request);
  if (!caller.admin) throw new BatonError('forbidden', 'this needs an admin token');
  return caller;
}

/**
 * Whose handoffs the caller may see (libs/domain/visibility.ts). An agent sees what it sent or
 * received and the unowned work of its project. An admin sees unowned work and what it sent
 * itself, and everything with `all_owners=true`; anyone else asking for that is refused. An
 * admin naming an agent with `X-Baton-Agent` (an MCP session acting for it) sees exactly what
 * that agent sees, unless it asks for `all_owners` too.
 */
export function viewerOf(request: FastifyRequest, allOwners: 'true' | 'false' | undefined): Viewer {
  const caller = callerOf(request);
  const all = allOwners === 'true';
  if (all && !caller.admin) throw new BatonError('forbidden', 'all_owners needs an admin token');
  if (!all && caller.admin && request.viewAs) return { agentId: request.viewAs.id, tokenId: null, allOwners: false };
  return { agentId: caller.agent?.id ?? null, tokenId: caller.tokenId, allOwners: all };
}

/**
 * The agent whose inbox or outbox is asked for: an agent token reads its own only (naming
 * another is refused); an admin names any.
 */
export function ownBox(request: FastifyRequest, named: string): string {
  const caller = callerOf(request);
  if (caller.agent && named.toLowerCase() !== caller.agent.handle) {
    throw new BatonError('forbidden', `this token belongs to ${caller.agent.handle}; it cannot read ${named.toLowerCase()}'s box`);
  }
  return named;
}

/**
 * A list's `?limit=` (the schema admits 1 to 999 digits-wise): the default page size when
 * absent. @throws BatonError validation_failed above LIMITS.pageSizeMax
 */
export function pageLimit(raw: string | undefined): number {
  if (raw === undefined) return LIMITS.pageSizeDefault;
  const n = Number(raw);
  if (n > LIMITS.pageSizeMax) throw new BatonError('validation_failed', `querystring/limit must be at most ${LIMITS.pageSizeMax}`);
  return n;
}
