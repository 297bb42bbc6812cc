import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { BatonError } from '../../../../libs/domain/errors.ts';
import { parseTimestamp } from '../../../../libs/domain/timestamps.ts';
import { readUsage, type UsageDeps } from '../../../../libs/handoffs/turn-usage.ts';
import { presentUsageReport } from '../../present-usage.ts';
import { projectOf, viewerOf, type RouteOptions } from '../../route-context.ts';
import { ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import { UsageQuery, UsageReportJson } from '../../schemas/usage.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

const timeOf = (name: string, raw: string | undefined): Date | undefined => {
  if (raw === undefined) return undefined;
  const at = parseTimestamp(raw);
  if (!at) throw new BatonError('validation_failed', `querystring/${name} must be an ISO 8601 time that exists (2026-12-01T09:00:00Z)`);
  return at;
};

/**
 * `GET /v1/usage`: turn accounting per agent and model over a time range (`since`, default the
 * start of today UTC; `until`, default now). An agent token sees its own turns; an admin every
 * agent of the project (`?agent=` narrows it).
 */
const usageRoutes: FastifyPluginAsyncTypebox<RouteOptions<UsageDeps>> = async (app, opts) => {
  tagRoutes(app, 'views');
  app.get(
    '/usage',
    { schema: { headers: ProjectHeader, querystring: UsageQuery, response: { 200: UsageReportJson, '4xx': ErrorBody } } },
    async (request) => {
      const q = request.query;
      const report = await readUsage(opts.core, {
        project: projectOf(request, opts.defaultProject, q.project),
        agent: q.agent,
        since: timeOf('since', q.since),
        until: timeOf('until', q.until),
        viewer: viewerOf(request, undefined),
      });
      return presentUsageReport(report);
    },
  );
};

export default usageRoutes;
