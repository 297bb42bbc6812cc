import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticate, type AuthDeps } from '../../../libs/handoffs/manage-tokens.ts';
import type { Caller } from '../../../libs/handoffs/caller.ts';
import { getAgent } from '../../../libs/handoffs/manage-agents.ts';
import { BatonError } from '../../../libs/domain/errors.ts';
import { projectOf } from '../route-context.ts';
import type { CoreDeps } from '../../../libs/handoffs/ports.ts';
import type { TokenRepository } from '../../../libs/db/token-repository.ts';
import type { RequestLimiter } from './rate-limit.ts';
import { sessionCookieOf, type BrowserSessions } from './browser-session.ts';
import { API_DEFAULTS } from '../../../libs/config/component-defaults.ts';

/** How often a token's last_used_at is written (at most), so reads stay reads. */
const TOUCH_EVERY_MS = API_DEFAULTS.tokenTouchEveryMs;

/**
 * What the authentication hooks touch: proving the caller (AuthDeps), the agent an
 * `X-Baton-Agent` header names, the token's last use, and the audit rows.
 */
export type AuthenticationDeps = AuthDeps &
  Pick<CoreDeps, 'agents' | 'audit' | 'clock'> & { readonly tokens: Pick<TokenRepository, 'findBySecretHash' | 'touch'> };

/**
 * Proves the request's caller, no budget spent: its bearer token, else its browser session
 * cookie. A response that stays open (an event stream) calls it again now and then, and ends
 * once its token is revoked, its agent removed or its browser session over.
 * @throws BatonError unauthenticated, invalid_token (and a browser session's refusals)
 */
export async function proveCaller(request: FastifyRequest, core: AuthDeps, browser: BrowserSessions | undefined): Promise<Caller> {
  // A bearer token wins; without one, a browser's session cookie stands for the token it was opened with.
  return !request.headers.authorization && browser && sessionCookieOf(request) !== undefined
    ? (await browser.resolve(request, core)).caller
    : await authenticate(core, request.headers.authorization);
}

/**
 * Proves the request's caller: its bearer token, else (when `browser` is given) its browser
 * session cookie (Host, Origin and CSRF checked: browser-session.ts). A refused caller spends
 * the per-address budget before the refusal is thrown (`limiter`; keyed by the client address,
 * since no caller is known), so guessing tokens is limited everywhere it is tried; an accepted
 * one spends its token's budget unless `limitAccepted` is false (a route whose work is limited
 * elsewhere: `/mcp` calls /v1, which counts each call).
 * @throws BatonError unauthenticated (or a browser session's refusal), rate_limited
 */
export async function authenticateRequest(
  request: FastifyRequest,
  reply: FastifyReply,
  core: AuthDeps,
  limiter: RequestLimiter | undefined,
  opts: { readonly browser?: BrowserSessions | undefined; readonly limitAccepted?: boolean } = {},
): Promise<Caller> {
  let caller: Caller;
  try {
    caller = await proveCaller(request, core, opts.browser);
  } catch (refused) {
    if (limiter) await limiter(request, reply);
    throw refused;
  }
  request.caller = caller;
  if (limiter && opts.limitAccepted !== false) await limiter(request, reply);
  return caller;
}

/**
 * The agent an `X-Baton-Agent` header names. For an admin token: that agent of the request's
 * project (its reads then show what the agent sees); for an agent token: itself, and naming
 * any other is refused.
 * @throws BatonError agent_not_found, identity_mismatch
 */
async function viewingAs(
  request: FastifyRequest,
  core: Pick<CoreDeps, 'agents'>,
  caller: Caller,
  named: string,
  defaultProject: string,
): Promise<{ id: string; handle: string } | undefined> {
  if (caller.agent) {
    if (named.toLowerCase() !== caller.agent.handle)
      throw new BatonError('identity_mismatch', `this token belongs to ${caller.agent.handle}; it cannot act as ${named.toLowerCase()}`);
    return undefined;
  }
  const agent = await getAgent(core, projectOf(request, defaultProject), named);
  return { id: agent.id, handle: agent.handle };
}

/**
 * Every request in the scope it is installed in proves its caller with a bearer token (or a
 * browser session cookie, when `browser` is given) before
 * anything else happens (the body is not even parsed for a refused one) and is rate-limited
 * (plugins/rate-limit.ts): per token, or per client address when the token is refused, so
 * guessing tokens spends a budget too. Its answer, refusals included, is `Cache-Control:
 * private, no-store` (no-store.ts runs first). Successful changes outside the handoff event log
 * are audited by token id.
 */
export function installAuthentication(
  app: FastifyInstance,
  core: AuthenticationDeps,
  limiter: RequestLimiter | undefined,
  browser?: BrowserSessions,
  defaultProject = 'default',
): void {
  const touched = new Map<string, number>();

  app.addHook('onRequest', async (request, reply) => {
    const caller = await authenticateRequest(request, reply, core, limiter, { browser });
    const named = request.headers['x-baton-agent'];
    if (typeof named === 'string' && named !== '') request.viewAs = await viewingAs(request, core, caller, named, defaultProject);
    const now = core.clock.now();
    const last = touched.get(caller.tokenId) ?? 0;
    if (now.getTime() - last >= TOUCH_EVERY_MS) {
      touched.set(caller.tokenId, now.getTime());
      if (touched.size > 10_000) touched.clear();
      core.tokens.touch(caller.tokenId, now).catch((err: unknown) => request.log.warn({ err }, 'could not record token use'));
    }
  });

  // Handoff moves carry their token id in their own event rows, in the same transaction; every
  // other change (agents, tokens, projects, settings, connections, sessions, facts) leaves an
  // audit row naming its token, written once the change has succeeded.
  app.addHook('onResponse', async (request, reply) => {
    if (request.method === 'GET' || request.method === 'HEAD' || !request.caller || reply.statusCode >= 400) return;
    const route = request.routeOptions.url ?? request.url;
    if (route.startsWith('/v1/handoffs')) return;
    const header = request.headers['x-baton-project'];
    await core.audit
      .record({
        tokenId: request.caller.tokenId,
        project: request.caller.projectSlug ?? (typeof header === 'string' ? header.toLowerCase() : null),
        method: request.method,
        route,
        params: (request.params ?? {}) as Record<string, unknown>,
        status: reply.statusCode,
        at: core.clock.now(),
      })
      .catch((err: unknown) => request.log.error({ err, route }, 'could not write the audit row'));
  });
}
