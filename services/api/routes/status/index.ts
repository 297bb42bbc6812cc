import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { getStatus, type StatusDeps } from '../../../../libs/handoffs/query-handoffs.ts';
import { callerOf, projectOf, viewerOf, type RouteOptions } from '../../route-context.ts';
import { AllOwnersQuery, ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import { StatusJson } from '../../schemas/views.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

const statusRoutes: FastifyPluginAsyncTypebox<RouteOptions<StatusDeps>> = async (app, opts) => {
  tagRoutes(app, 'views');
  app.get(
    '/status',
    { schema: { headers: ProjectHeader, querystring: AllOwnersQuery, response: { 200: StatusJson, '4xx': ErrorBody } } },
    async (request) => {
      const viewer = viewerOf(request, request.query.all_owners);
      // Only an admin is told how many it does not see: it could see them, an agent may not.
      return getStatus(opts.core, projectOf(request, opts.defaultProject), viewer, callerOf(request).admin && !viewer.allOwners);
    },
  );
};

export default statusRoutes;
