import { readFileSync } from 'node:fs';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, FastifySchema } from 'fastify';
import type { RequestLimiter } from './rate-limit.ts';

/** Where the OpenAPI 3 document is served (JSON), and the UI that renders it. */
export const OPENAPI_PATH = '/openapi.json';
export const DOCS_PREFIX = '/docs';

/**
 * Routes that are not part of the JSON API and so are left out of the document (`schema.hide`):
 * the document itself and the UI's page and assets, the browser pages and their session routes
 * (`/ui`, docs/API.md 'Browser pages'), Bull Board, and the site's root (`/`, a redirect to the
 * live page; matched exactly, as each prefix is matched whole). test/integration/openapi.test.ts holds every
 * other route to being in the document with its schemas.
 */
export const UNDOCUMENTED_PREFIXES: readonly string[] = [OPENAPI_PATH, DOCS_PREFIX, '/ui', '/admin/queues', '/'];

const undocumented = (url: string) => UNDOCUMENTED_PREFIXES.some((p) => url === p || url.startsWith(`${p}/`));

/** A route as it was registered: what the document is built from. */
export interface RegisteredRoute {
  readonly method: string;
  readonly url: string;
  readonly schema: (FastifySchema & { response?: Record<string, unknown>; hide?: boolean }) | undefined;
}

const catalogs = new WeakMap<FastifyInstance, RegisteredRoute[]>();

/** Every route registered on `app` after installOpenApi, with its schema (HEAD twins included). */
export function registeredRoutes(app: FastifyInstance): readonly RegisteredRoute[] {
  return catalogs.get(app) ?? [];
}

/**
 * The areas the document groups its operations under, in the order the UI shows them. Each
 * route plugin names its own with `tagRoutes` (a route outside every area would sit under the
 * UI's "default"; test/integration/openapi.test.ts refuses that).
 */
export const OPENAPI_TAGS = [
  { name: 'handoffs', description: 'Send, read, cancel, acknowledge and release handoffs (the delivery side).' },
  { name: 'work', description: 'What a recipient does with a handoff: accept, heartbeat, return, close; its outbox and the board.' },
  { name: 'agents', description: 'Agents of a project: register, list, remove, their inbox.' },
  { name: 'sessions', description: 'Shared sessions and their facts.' },
  { name: 'identity', description: 'Who the caller is, tokens, projects and the audit log.' },
  { name: 'events', description: 'The transitions the caller may see, as server-sent events.' },
  { name: 'views', description: "Read-only summaries: the status, turn usage and the live page's first paint." },
  { name: 'settings', description: 'Runtime settings and connection rules.' },
  { name: 'budgets', description: 'What a project, or one agent, may spend a UTC day on delivered turns; a spent budget holds new turns.' },
  { name: 'subscriptions', description: 'Signed event subscriptions: handoff events POSTed to a URL, their dead letters and replay.' },
  { name: 'webhooks', description: 'Turn reports from webhook agents (signed, no token).' },
  { name: 'mcp', description: "Baton's MCP tools over streamable HTTP." },
  { name: 'a2a', description: 'The A2A gateway (protocol 1.0): agent cards and a JSON-RPC endpoint per agent.' },
  { name: 'health', description: 'Liveness, readiness and Prometheus metrics.' },
] as const;

export type OpenApiTag = (typeof OPENAPI_TAGS)[number]['name'];

/**
 * Puts every route `app` (a route plugin's scope) registers from now on under `tag` in the
 * document. Call it first in the plugin; it sets the schema's `tags` where the schema has none.
 */
export function tagRoutes(app: FastifyInstance, tag: OpenApiTag): void {
  app.addHook('onRoute', (route) => {
    // In place: @fastify/swagger and the catalog above keep this very object.
    if (route.schema && !route.schema.tags) Object.assign(route.schema, { tags: [tag] });
  });
}

/** Only the UI's own files: no CDN, no validator badge, no inline script. */
const DOCS_CSP =
  "default-src 'self'; base-uri 'self'; connect-src 'self'; font-src 'self' data:; form-action 'self'; " +
  "frame-ancestors 'none'; img-src 'self' data:; object-src 'none'; script-src 'self'; style-src 'self'";

/** Baton's version for the document; a build that moved this file away from package.json says "unknown". */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
const version = packageVersion();

/**
 * Collects every route registered after it (@fastify/swagger's onRoute hook) into an OpenAPI
 * 3.0 document built from the routes' own TypeBox schemas, so it cannot describe another API
 * than the one that runs. Install before the routes.
 */
export async function installOpenApi(app: FastifyInstance): Promise<void> {
  const catalog: RegisteredRoute[] = [];
  catalogs.set(app, catalog);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) catalog.push({ method, url: route.url, schema: route.schema as RegisteredRoute['schema'] });
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Baton API',
        version,
        description:
          'Durable handoffs between AI coding agents. Errors are `{ "error": { "code", "message", "details"? } ' +
          '}` with the codes of docs/ERRORS.md; every route lists its own. Limits and who may call what: ' +
          'docs/API.md.',
      },
      tags: OPENAPI_TAGS.map((t) => ({ ...t })),
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'an agent or admin token, `baton_…`' } } },
      security: [{ bearer: [] }],
    },
    // Routes a plugin registers (Bull Board's, the pages') are hidden by where they live.
    transform: ({ schema, url }) => ({ schema: undocumented(url) ? { ...(schema ?? {}), hide: true } : schema, url }),
  });
}

/**
 * `GET /openapi.json` and the UI at `/docs`, served from the package's own files. Both are
 * open (no token): the document describes the API's shape, which holds no data and is the same
 * for every caller; they are rate-limited per client address like any unauthenticated call.
 * Register after every route, so the document is complete when first asked for.
 */
export async function installOpenApiRoutes(app: FastifyInstance, limiter: RequestLimiter | undefined): Promise<void> {
  const onRequest = limiter ? [limiter] : [];
  app.get(OPENAPI_PATH, { schema: { hide: true }, onRequest }, async () => app.swagger());
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    uiConfig: { deepLinking: true },
    validatorUrl: false,
    staticCSP: DOCS_CSP,
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- swagger-ui adds it with addHook, which takes an async hook
    ...(limiter ? { uiHooks: { onRequest: limiter } } : {}),
  });
}
