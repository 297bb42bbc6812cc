import { createBullBoard } from '@bull-board/api';
import type { UIConfig } from '@bull-board/api/typings/app';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import { Queue } from 'bullmq';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RedisClient } from '../../../../libs/queue/open-redis.ts';
import { BatonError, ERROR_CATALOG } from '../../../../libs/domain/errors.ts';
import type { AuthDeps } from '../../../../libs/handoffs/manage-tokens.ts';
import type { RedisNames } from '../../../../libs/queue/redis-names.ts';
import type { BrowserSessions } from '../../plugins/browser-session.ts';
import type { RequestLimiter } from '../../plugins/rate-limit.ts';
import { authenticateRequest } from '../../plugins/authenticate.ts';
import { API_DEFAULTS } from '../../../../libs/config/component-defaults.ts';

/** Where Bull Board is served. */
export const ADMIN_QUEUES_PREFIX = '/admin/queues';

/**
 * Bull Board's page loads its own script and style files (and inline styles from its
 * components), its fonts and images from itself, and talks only to its own API.
 */
const BOARD_CSP =
  "default-src 'self'; base-uri 'self'; connect-src 'self'; font-src 'self' data:; form-action 'self'; " +
  "frame-ancestors 'none'; img-src 'self' data:; object-src 'none'; script-src 'self'; style-src 'self' " +
  "'unsafe-inline'";

/**
 * Bull Board's settings: Baton's title, a link back to the live page (in its header's menu),
 * no link to Bull Board's documentation site, and the system's own fonts: nothing the page asks
 * for leaves this origin (the CSP would refuse it, and a deployment may have no Internet).
 */
export const BOARD_UI = {
  boardTitle: 'Baton queues',
  miscLinks: [{ text: '← Baton live page', url: '/ui/' }],
  hideDocsLink: true,
  theme: {
    light: { 'font-sans': 'system-ui, sans-serif', 'font-mono': 'ui-monospace, monospace' },
    dark: { 'font-sans': 'system-ui, sans-serif', 'font-mono': 'ui-monospace, monospace' },
  },
} satisfies UIConfig;

/** The stylesheet link Bull Board's page template has to Google Fonts (removed from the page). */
const GOOGLE_FONTS_LINK = /<link\b[^>]*fonts\.googleapis\.com[^>]*>\s*/gi;

/**
 * A way back that needs no menu: put on the page outside Bull Board's React root (which keeps
 * it), in the middle of its header bar. Its CSP allows inline styles (Bull Board's need them).
 */
const BACK_LINK =
  '<a id="baton-live-link" href="/ui/" ' +
  'style="position:fixed;top:22px;left:50%;transform:translateX(-50%);z-index:1000;font:600 14px ' +
  'system-ui,sans-serif;color:#2563eb;text-decoration:none">← Baton live page</a>';

/** Bull Board's page as Baton serves it: no Google Fonts, a link back to the live page. */
export function adaptBoardPage(html: string): string {
  return html.replace(GOOGLE_FONTS_LINK, '').replace(/<body\b[^>]*>/, (body) => `${body}\n${BACK_LINK}`);
}

/** How long the list of queues shown is reused before the agents table is asked again. */
const QUEUE_LIST_TTL_MS = API_DEFAULTS.queueListTtlMs;

export interface AdminQueuesOptions {
  /** Only to prove the caller. */
  readonly core: AuthDeps;
  readonly browser: BrowserSessions | undefined;
  readonly limiter: RequestLimiter | undefined;
  /** The Redis the delivery queues live in (the API's producer connection). */
  readonly redis: RedisClient;
  readonly names: RedisNames;
  /** Every delivery queue the deployment uses now (each provider and pool with agents, every shard). */
  readonly queueNames: () => Promise<readonly string[]>;
}

/**
 * Bull Board at `/admin/queues`: every delivery queue, read-only (`readOnlyMode`: no retry,
 * promote, clean, pause or job removal, which would move work behind the state machine's back;
 * Bull Board answers those 405 `QUEUE_READ_ONLY`). Admins only: an admin's browser session
 * (Host, Origin and CSRF checked) or bearer token; anyone else is refused before Bull Board
 * sees the request. BullMQ is transport: what a handoff's state is comes from Postgres, never
 * from this page.
 */
export async function installAdminQueues(app: FastifyInstance, opts: AdminQueuesOptions): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(ADMIN_QUEUES_PREFIX);
  const board = createBullBoard({ queues: [], serverAdapter, options: { uiConfig: BOARD_UI } });
  const queues = new Map<string, Queue>();
  let listedAt = 0;
  let shown = '';

  // Once a second at most per burst of page requests: new agents (a new pool) appear by themselves.
  const refresh = async () => {
    if (Date.now() - listedAt < QUEUE_LIST_TTL_MS) return;
    listedAt = Date.now();
    const names = [...(await opts.queueNames())].sort();
    if (names.join('\n') === shown) return;
    shown = names.join('\n');
    for (const name of names) {
      if (!queues.has(name)) queues.set(name, new Queue(name, { connection: opts.redis, prefix: opts.names.bullPrefix }));
    }
    board.replaceQueues(names.map((name) => new BullMQAdapter(queues.get(name) as Queue, { readOnlyMode: true })));
  };

  const refuse = (reply: FastifyReply, err: BatonError) =>
    reply.status(ERROR_CATALOG[err.code].status).send({ error: { code: err.code, message: err.message } });

  // Bull Board installs its own error handler in its scope, so refusals are answered here, in
  // the catalog's shape, rather than thrown.
  const guard = async (request: FastifyRequest, reply: FastifyReply) => {
    reply.header('content-security-policy', BOARD_CSP);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'no-referrer');
    try {
      // Refused callers spend the per-address budget too, as everywhere.
      const caller = await authenticateRequest(request, reply, opts.core, opts.limiter, { browser: opts.browser });
      if (!caller.admin) throw new BatonError('forbidden', "Bull Board needs an admin token (or an admin's browser session)");
      await refresh();
    } catch (err) {
      if (!(err instanceof BatonError)) throw err;
      // A browser with no session is sent to sign in and back.
      if (err.code === 'unauthenticated' && request.method === 'GET' && (request.headers.accept ?? '').includes('text/html')) {
        return reply.redirect(`/ui/sign-in?next=${encodeURIComponent(ADMIN_QUEUES_PREFIX)}`, 303);
      }
      return refuse(reply, err);
    }
    return undefined;
  };

  await app.register(async (scope) => {
    scope.addHook('onRequest', guard);
    // Bull Board's page template links Google Fonts' stylesheet; its fonts are the system's here.
    scope.addHook('onSend', async (_request, reply, payload) => {
      const type = String(reply.getHeader('content-type') ?? '');
      return typeof payload === 'string' && type.startsWith('text/html') ? adaptBoardPage(payload) : payload;
    });
    await scope.register(serverAdapter.registerPlugin(), { prefix: ADMIN_QUEUES_PREFIX });
  });
  app.addHook('onClose', async () => {
    // Closing at shutdown: a queue whose connection is gone has nothing left to close.
    await Promise.all([...queues.values()].map((q) => q.close().catch(() => undefined)));
  });
}
