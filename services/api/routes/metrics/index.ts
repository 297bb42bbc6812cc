import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { BatonMetrics } from '../../../../libs/metrics/baton-metrics.ts';
import { installAuthentication, type AuthenticationDeps } from '../../plugins/authenticate.ts';
import type { RequestLimiter } from '../../plugins/rate-limit.ts';
import { requireAdmin } from '../../route-context.ts';
import { ErrorBody } from '../../schemas/common.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

export interface MetricsRouteOptions {
  readonly core: AuthenticationDeps;
  readonly metrics: BatonMetrics;
  readonly limiter: RequestLimiter | undefined;
}

/**
 * `GET /metrics`: Prometheus text for admins only (a bearer admin token; an agent token is 403
 * `forbidden`): the counts it shows span every project. Authenticated and rate-limited like /v1.
 */
const metricsRoutes: FastifyPluginAsyncTypebox<MetricsRouteOptions> = async (app, opts) => {
  tagRoutes(app, 'health');
  installAuthentication(app, opts.core, opts.limiter);
  app.get(
    '/metrics',
    {
      schema: {
        description:
          'Prometheus text exposition (version 0.0.4): transitions, delivery times, queues, turns, locks, ' +
          'reconciler actions, HTTP requests, process. Admins only.',
        response: { 200: { description: 'the metrics', content: { 'text/plain': { schema: Type.String() } } }, '4xx': ErrorBody },
      },
    },
    async (request, reply) => {
      requireAdmin(request);
      const text = await opts.metrics.registry.metrics();
      return reply.type(opts.metrics.registry.contentType).send(text);
    },
  );
};

export default metricsRoutes;
