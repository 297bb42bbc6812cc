import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { BatonError } from '../../../../libs/domain/errors.ts';
import { LIMITS } from '../../../../libs/domain/limits.ts';
import { getAgent, listAgents, registerAgent, removeAgent, updateAgent } from '../../../../libs/handoffs/manage-agents.ts';
import { presentAgent, presentHandoff, presentNotification } from '../../present.ts';
import { getInbox } from '../../../../libs/handoffs/query-handoffs.ts';
import { callerOf, ownBox, projectOf, requireAdmin, viewerOf, type RouteOptions } from '../../route-context.ts';
import { AgentParams, AllOwnersQuery, ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import { AgentJson, InboxJson, RegisterAgentBody, UpdateAgentBody } from '../../schemas/agents.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

const agentRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, opts) => {
  tagRoutes(app, 'agents');
  const { core, defaultProject } = opts;

  app.post(
    '/agents',
    { schema: { headers: ProjectHeader, body: RegisterAgentBody, response: { 201: AgentJson, '4xx': ErrorBody } } },
    async (request, reply) => {
      requireAdmin(request);
      const { id, displayName, provider, settings, target, pool, roles, description, skills } = request.body;
      if (settings && Buffer.byteLength(JSON.stringify(settings)) > LIMITS.providerSettingsBytes) {
        throw new BatonError('field_too_long', `settings must be at most ${LIMITS.providerSettingsBytes} bytes of JSON`);
      }
      const agent = await registerAgent(core, {
        project: projectOf(request, defaultProject),
        handle: id,
        displayName,
        provider,
        providerSettings: settings,
        deliveryTarget: target,
        pool,
        roles,
        card: { description, skills },
      });
      return reply.status(201).send(presentAgent(agent));
    },
  );

  app.get(
    '/agents',
    { schema: { headers: ProjectHeader, response: { 200: Type.Object({ items: Type.Array(AgentJson) }) } } },
    async (request) => ({ items: (await listAgents(core, projectOf(request, defaultProject))).map(presentAgent) }),
  );

  app.get(
    '/agents/:id',
    { schema: { headers: ProjectHeader, params: AgentParams, response: { 200: AgentJson, '4xx': ErrorBody } } },
    async (request) => presentAgent(await getAgent(core, projectOf(request, defaultProject), request.params.id)),
  );

  app.patch(
    '/agents/:id',
    { schema: { headers: ProjectHeader, params: AgentParams, body: UpdateAgentBody, response: { 200: AgentJson, '4xx': ErrorBody } } },
    async (request) => {
      requireAdmin(request);
      return presentAgent(await updateAgent(core, projectOf(request, defaultProject), request.params.id, request.body));
    },
  );

  app.get(
    '/agents/:id/inbox',
    {
      schema: { headers: ProjectHeader, params: AgentParams, querystring: AllOwnersQuery, response: { 200: InboxJson, '4xx': ErrorBody } },
    },
    async (request) => {
      const inbox = await getInbox(
        core,
        projectOf(request, defaultProject),
        ownBox(request, request.params.id),
        viewerOf(request, request.query.all_owners),
      );
      return {
        agent: inbox.agent,
        handoffs: inbox.handoffs.map(presentHandoff),
        notifications: inbox.notifications.map(presentNotification),
      };
    },
  );

  app.delete(
    '/agents/:id',
    { schema: { headers: ProjectHeader, params: AgentParams, response: { 204: Type.Null(), '4xx': ErrorBody } } },
    async (request, reply) => {
      requireAdmin(request);
      await removeAgent(core, projectOf(request, defaultProject), request.params.id, callerOf(request).tokenId);
      return reply.status(204).send(null);
    },
  );
};

export default agentRoutes;
