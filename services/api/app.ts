import type { TrustProxy } from '../../libs/config/api-hosts.ts';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { LIMITS } from '../../libs/domain/limits.ts';
import type { CoreDeps } from '../../libs/handoffs/ports.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import { installErrorHandler, type Outages } from './plugins/error-handler.ts';
import { installTextGuard } from './plugins/text-guard.ts';
import { installJsonBody } from './plugins/json-body.ts';
import { installNoStore, NO_STORE } from './plugins/no-store.ts';
import { answerClientError } from './plugins/client-errors.ts';
import { installClosingRefusal } from './plugins/refuse-while-closing.ts';
import agentRoutes from './routes/agents/index.ts';
import handoffRoutes from './routes/handoffs/index.ts';
import healthRoutes, { type HealthChecks } from './routes/health/index.ts';
import webhookRoutes from './routes/webhooks/index.ts';
import type { TurnReportRepository } from '../../libs/db/turn-report-repository.ts';
import statusRoutes from './routes/status/index.ts';
import settingsRoutes from './routes/settings/index.ts';
import budgetRoutes from './routes/budgets/index.ts';
import workRoutes from './routes/work/index.ts';
import sessionRoutes from './routes/sessions/index.ts';
import identityRoutes from './routes/identity/index.ts';
import eventRoutes, { type EventStreamLimits } from './routes/events/index.ts';
import type { EventFeed } from '../../libs/handoffs/event-feed.ts';
import { installAuthentication } from './plugins/authenticate.ts';
import mcpRoutes from './routes/mcp/index.ts';
import a2aRoutes from './routes/a2a/index.ts';
import type { RedisClient } from '../../libs/queue/open-redis.ts';
import type { RedisNames } from '../../libs/queue/redis-names.ts';
import { installRateLimit, type RateLimit } from './plugins/rate-limit.ts';
import { installOpenApi, installOpenApiRoutes } from './plugins/openapi.ts';
import metricsRoutes from './routes/metrics/index.ts';
import type { BatonMetrics } from '../../libs/metrics/baton-metrics.ts';
import liveRoutes from './routes/live/index.ts';
import usageRoutes from './routes/usage/index.ts';
import subscriptionRoutes from './routes/subscriptions/index.ts';
import uiRoutes from './routes/ui/index.ts';
import { installAdminQueues } from './routes/admin-queues/index.ts';
import type { BrowserSessions } from './plugins/browser-session.ts';

export interface AppDeps {
  readonly core: CoreDeps;
  readonly checks: HealthChecks;
  /** Outages the process reports itself (its 503s then log at debug); absent: every 5xx is an error line. */
  readonly outages?: Outages | undefined;
  readonly defaultProject: string;
  readonly logger: Logger;
  /**
   * Per-token request rate, counted in Redis under `names.rateLimitNamespace` so every API
   * process shares it (plugins/rate-limit.ts); absent, or perSecond 0: no limit.
   */
  readonly rateLimit?: { readonly limit: RateLimit; readonly redis: RedisClient; readonly names: RedisNames } | undefined;
  /** This process's Prometheus registry: absent, no `/metrics` route and no request timing. */
  readonly metrics?: BatonMetrics | undefined;
  /** Where webhook agents' signed callbacks are stored (libs/db `turnReports`). */
  readonly turnReports: TurnReportRepository;
  /** Serves `GET /v1/events` (absent: 503 `events_unavailable`); the app closes it when it closes. */
  readonly feed?: EventFeed | undefined;
  /** Bounds of each event stream (slow readers, how often its caller is proven again); the documented defaults otherwise. */
  readonly eventStreamLimits?: EventStreamLimits | undefined;
  /**
   * Browser sign-in (cookie sessions in Redis, with Host, Origin and CSRF checks): absent, the
   * live page's files are served but nobody can sign in, and there is no Bull Board.
   */
  readonly browser?: BrowserSessions | undefined;
  /**
   * `BATON_TRUST_PROXY`: believe a reverse proxy's X-Forwarded-Proto/-Host/-For (the scheme and
   * host a browser's Origin is compared with, the cookie's Secure attribute, the client address
   * rate limits count). Off by default.
   */
  readonly trustProxy?: TrustProxy | undefined;
  /** Bull Board's queues (needs `browser`): the Redis they live in and every queue name in use. */
  readonly queueBoard?:
    { readonly redis: RedisClient; readonly names: RedisNames; readonly queueNames: () => Promise<readonly string[]> } | undefined;
}

/**
 * Builds the HTTP API from what it is given; it opens no connection and listens on nothing
 * (server.ts does). Tests call `app.inject()`. Everything under /v1, and `/mcp`, needs a bearer
 * token (or a browser session cookie), and `/metrics` an admin's; health, readiness, the signed
 * webhook callback, the OpenAPI document (`/openapi.json`) and its UI (`/docs`), and the browser
 * pages' files (`/ui/`) do not. Bull Board (`/admin/queues`) needs an admin.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- it fixes Fastify's logger type parameter
    loggerInstance: deps.logger as FastifyBaseLogger,
    trustProxy: typeof deps.trustProxy === 'object' ? [...deps.trustProxy] : (deps.trustProxy ?? false),
    bodyLimit: LIMITS.bodyBytes,
    // Per-request lines are too chatty at send rates; errors are logged by the error handler.
    logController: new LogController({ disableRequestLogging: true }),
    // No coercion: a number where a string belongs is an error, not a silent conversion.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: false } },
    // Refused by plugins/refuse-while-closing.ts instead, in the catalog's shape.
    return503OnClosing: false,
    // Ids are UUIDs or handles; anything longer is refused as invalid (400), not as 414.
    routerOptions: { maxParamLength: 200 },
    // Router errors (a malformed %-escape, an over-long path parameter) in the catalog's shape;
    // no hook runs for them, so they set the cache header themselves.
    frameworkErrors: (err, _request, reply) => {
      const message = err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path parameter is longer than any id' : 'the URL is malformed';
      void (reply as FastifyReply)
        .code(400)
        .header('cache-control', NO_STORE)
        .send({ error: { code: 'validation_failed', message } });
    },
    // What Node's HTTP parser refuses (an over-long URL or headers, malformed HTTP) in the same shape.
    clientErrorHandler: answerClientError,
  }).withTypeProvider<TypeBoxTypeProvider>();
  installNoStore(app);
  installErrorHandler(app, deps.outages);
  installClosingRefusal(app);
  installJsonBody(app);
  installTextGuard(app);
  const limiter = deps.rateLimit ? await installRateLimit(app, deps.rateLimit) : undefined;
  // Before any route: @fastify/swagger collects every route registered after it.
  await installOpenApi(app);
  const metrics = deps.metrics;
  if (metrics) {
    // By route pattern (`/v1/handoffs/:id`), never the raw URL; an unmatched one is `unmatched`.
    app.addHook('onResponse', async (request, reply) => {
      metrics.observeRequest(request.method, request.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
    });
  }
  await app.register(healthRoutes, { checks: deps.checks });
  // Webhook callbacks prove themselves with the agent's signature, not a bearer token.
  await app.register(webhookRoutes, { deps: { turnReports: deps.turnReports, clock: deps.core.clock, logger: deps.logger } });
  const routeOptions = { core: deps.core, defaultProject: deps.defaultProject };
  await app.register(
    async (v1) => {
      installAuthentication(v1, deps.core, limiter, deps.browser, deps.defaultProject);
      await v1.register(identityRoutes, routeOptions);
      await v1.register(agentRoutes, routeOptions);
      await v1.register(handoffRoutes, routeOptions);
      await v1.register(statusRoutes, routeOptions);
      await v1.register(settingsRoutes, routeOptions);
      await v1.register(budgetRoutes, routeOptions);
      await v1.register(workRoutes, routeOptions);
      await v1.register(sessionRoutes, routeOptions);
      await v1.register(eventRoutes, { ...routeOptions, feed: deps.feed, browser: deps.browser, limits: deps.eventStreamLimits });
      await v1.register(liveRoutes, routeOptions);
      await v1.register(usageRoutes, routeOptions);
      await v1.register(subscriptionRoutes, routeOptions);
    },
    { prefix: '/v1' },
  );
  // MCP over streamable HTTP: each request's bearer token is its identity; its tools call the
  // /v1 routes above in process (routes/mcp/index.ts), so they pass the same checks.
  await app.register(mcpRoutes, { core: deps.core, defaultProject: deps.defaultProject, inject: app.inject.bind(app), limiter });
  // The A2A gateway: agent cards and a JSON-RPC endpoint per agent, on /v1's tokens and use cases.
  await app.register(a2aRoutes, { core: deps.core, defaultProject: deps.defaultProject, limiter, feed: deps.feed });
  if (metrics) await app.register(metricsRoutes, { core: deps.core, metrics, limiter });
  // The live page and sign-in (/ui), and Bull Board (/admin/queues) for admins' browsers.
  await app.register(uiRoutes, { core: deps.core, browser: deps.browser, limiter });
  if (deps.browser && deps.queueBoard)
    await installAdminQueues(app, { core: deps.core, browser: deps.browser, limiter, ...deps.queueBoard });
  await installOpenApiRoutes(app, limiter);
  return app;
}
