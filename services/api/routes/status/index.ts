import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { getStatus } from '../../../../libs/handoffs/query-handoffs.ts';
import { projectOf, viewerOf, type RouteOptions } from '../../route-context.ts';
import { AllOwnersQuery, ErrorBody, ProjectHeader, StatusJson } from '../../schemas.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

const statusRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, opts) => {
  tagRoutes(app, 'views');
  app.get(
    '/status',
    { schema: { headers: ProjectHeader, querystring: AllOwnersQuery, response: { 200: StatusJson, '4xx': ErrorBody } } },
    async (request) => getStatus(opts.core, projectOf(request, opts.defaultProject), viewerOf(request, request.query.all_owners)),
  );
};

export default statusRoutes;
