import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { LIMITS } from '../../libs/domain/limits.ts';
import type { CoreDeps } from '../../libs/handoffs/ports.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import { installErrorHandler } from './plugins/error-handler.ts';
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
import workRoutes from './routes/work/index.ts';
import sessionRoutes from './routes/sessions/index.ts';
import identityRoutes from './routes/identity/index.ts';
import { installAuthentication } from './plugins/authenticate.ts';
import { DEFAULT_RATE_LIMIT, type RateLimit } from '../../libs/domain/rate-limit.ts';

export interface AppDeps {
  readonly core: CoreDeps;
  readonly checks: HealthChecks;
  readonly defaultProject: string;
  readonly logger: Logger;
  /** Per-token request rate (default DEFAULT_RATE_LIMIT; perSecond 0 turns it off). */
  readonly rateLimit?: RateLimit | undefined;
  /** Where webhook agents' signed callbacks are stored (libs/db `turnReports`). */
  readonly turnReports: TurnReportRepository;
}

/**
 * Builds the HTTP API from what it is given; it opens no connection and listens on nothing
 * (server.ts does). Tests call `app.inject()`. Everything under /v1 needs a bearer token;
 * health, readiness and the signed webhook callback do not.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
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
      void (reply as FastifyReply).code(400).header('cache-control', NO_STORE).send({ error: { code: 'validation_failed', message } });
    },
    // What Node's HTTP parser refuses (an over-long URL or headers, malformed HTTP) in the same shape.
    clientErrorHandler: answerClientError,
  }).withTypeProvider<TypeBoxTypeProvider>();
  installNoStore(app);
  installErrorHandler(app);
  installClosingRefusal(app);
  installJsonBody(app);
  installTextGuard(app);
  await app.register(healthRoutes, { checks: deps.checks });
  // Webhook callbacks prove themselves with the agent's signature, not a bearer token.
  await app.register(webhookRoutes, { deps: { turnReports: deps.turnReports, clock: deps.core.clock, logger: deps.logger } });
  const routeOptions = { core: deps.core, defaultProject: deps.defaultProject };
  await app.register(
    async (v1) => {
      installAuthentication(v1, deps.core, deps.rateLimit ?? DEFAULT_RATE_LIMIT);
      await v1.register(identityRoutes, routeOptions);
      await v1.register(agentRoutes, routeOptions);
      await v1.register(handoffRoutes, routeOptions);
      await v1.register(statusRoutes, routeOptions);
      await v1.register(settingsRoutes, routeOptions);
      await v1.register(workRoutes, routeOptions);
      await v1.register(sessionRoutes, routeOptions);
    },
    { prefix: '/v1' },
  );
  return app;
}
