import { readFileSync } from 'node:fs';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { BatonError } from '../../../../libs/domain/errors.ts';
import { authenticate, hashToken, type AuthDeps } from '../../../../libs/handoffs/manage-tokens.ts';
import type { Caller } from '../../../../libs/handoffs/caller.ts';
import type { BrowserSession, BrowserSessions } from '../../plugins/browser-session.ts';
import type { RequestLimiter } from '../../plugins/rate-limit.ts';
import { ErrorBody } from '../../schemas/common.ts';

/** Where the browser pages live. */
export const UI_PREFIX = '/ui';

/**
 * The pages' policy: their own script and style files and nothing else (no inline script or
 * style, no other origin, no framing); data comes only from this API (`connect-src 'self'`).
 */
export const UI_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/** The pages and the files they load, served from services/api/ui/ (copied beside the build). */
const FILES: Record<string, { file: string; type: string }> = {
  '/': { file: 'live.html', type: 'text/html; charset=utf-8' },
  '/sign-in': { file: 'sign-in.html', type: 'text/html; charset=utf-8' },
  '/assets/live.js': { file: 'live.js', type: 'text/javascript; charset=utf-8' },
  '/assets/live-chart.js': { file: 'live-chart.js', type: 'text/javascript; charset=utf-8' },
  '/assets/sign-in.js': { file: 'sign-in.js', type: 'text/javascript; charset=utf-8' },
  '/assets/ui.css': { file: 'ui.css', type: 'text/css; charset=utf-8' },
};

const contents = new Map(Object.entries(FILES).map(([path, f]) => [path, readFileSync(new URL(`../../ui/${f.file}`, import.meta.url))]));

export interface UiRouteOptions {
  /** Only to prove the caller (sign-in, and the session routes). */
  readonly core: AuthDeps;
  /** Absent (an app built without Redis): the pages are served, the session routes are not. */
  readonly browser: BrowserSessions | undefined;
  readonly limiter: RequestLimiter | undefined;
}

const SessionJson = Type.Object({
  caller: Type.Object({
    admin: Type.Boolean(),
    agent: Type.Union([Type.String(), Type.Null()]),
    project: Type.Union([Type.String(), Type.Null()]),
  }),
  csrfToken: Type.String(),
  expiresAt: Type.String({ format: 'date-time' }),
});

function presentSession(s: BrowserSession) {
  return { caller: presentCaller(s.caller), csrfToken: s.csrfToken, expiresAt: s.expiresAt.toISOString() };
}

function presentCaller(c: Caller) {
  return { admin: c.admin, agent: c.agent?.handle ?? null, project: c.projectSlug };
}

/**
 * The browser side of the API: the live page (`/ui/`), the sign-in page, their files, and the
 * session routes. `POST /ui/session` trades a bearer token (admin or agent) for a session
 * cookie; `GET /ui/session` tells the page who it is and its CSRF token; `DELETE /ui/session`
 * signs out. Every route here checks the Host (plugins/browser-session.ts) and carries a strict
 * CSP; the pages read the API with the cookie, so they see what the token may see.
 */
const uiRoutes: FastifyPluginAsyncTypebox<UiRouteOptions> = async (app, opts) => {
  const { browser } = opts;
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    reply.header('content-security-policy', UI_CSP);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('x-frame-options', 'DENY');
    reply.header('referrer-policy', 'no-referrer');
    browser?.requireAllowedHost(request);
  });

  // The site's root is the live page: a browser pointed at the API's address lands on it.
  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect(`${UI_PREFIX}/`, 302));
  app.get('/ui', { schema: { hide: true } }, async (_request, reply) => reply.redirect(`${UI_PREFIX}/`, 302));
  for (const [path, f] of Object.entries(FILES)) {
    const body = contents.get(path) as Buffer;
    app.get(`${UI_PREFIX}${path}`, { schema: { hide: true } }, async (_request, reply) => reply.type(f.type).send(body));
  }
  // A handoff's own address: the live page, which opens that handoff's timeline itself (the
  // id is checked by the API read the page makes, with the caller's visibility).
  const livePage = contents.get('/') as Buffer;
  app.get(
    `${UI_PREFIX}/handoffs/:id`,
    { schema: { hide: true, params: Type.Object({ id: Type.String({ maxLength: 64 }) }) } },
    async (_request, reply) => reply.type('text/html; charset=utf-8').send(livePage),
  );

  if (!browser) return;
  app.post(
    `${UI_PREFIX}/session`,
    {
      schema: {
        hide: true,
        body: Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
        response: { 200: SessionJson, '4xx': ErrorBody },
      },
      // Guessing tokens here spends the client address's budget, like a refused bearer token.
      onRequest: opts.limiter ? [opts.limiter] : [],
    },
    async (request, reply) => {
      browser.requireSameOrigin(request);
      const caller = await authenticate(opts.core, `Bearer ${request.body.token}`);
      const session = await browser.open(request, reply, hashToken(request.body.token), caller);
      request.log.info({ tokenId: caller.tokenId, admin: caller.admin }, 'browser session opened');
      return presentSession(session);
    },
  );

  app.get(`${UI_PREFIX}/session`, { schema: { hide: true, response: { 200: SessionJson, '4xx': ErrorBody } } }, async (request) =>
    presentSession(await browser.resolve(request, opts.core)),
  );

  app.delete(
    `${UI_PREFIX}/session`,
    { schema: { hide: true, response: { 204: Type.Null(), '4xx': ErrorBody } } },
    async (request, reply) => {
      // Signing out changes something: the same Origin and CSRF checks as any other change; a
      // session whose token was revoked meanwhile may still sign out.
      await browser.resolve(request, opts.core).catch((err: unknown) => {
        if (!(err instanceof BatonError && err.code === 'invalid_token')) throw err;
      });
      await browser.close(request, reply);
      return reply.status(204).send(null);
    },
  );
};

export default uiRoutes;
