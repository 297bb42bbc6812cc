import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { BatonError } from '../../../../libs/domain/errors.ts';
import type { TokenRecord } from '../../../../libs/db/token-repository.ts';
import type { ProjectRecord } from '../../../../libs/db/records.ts';
import { createToken, listTokens, revokeToken } from '../../../../libs/handoffs/manage-tokens.ts';
import { createProject, listProjects } from '../../../../libs/handoffs/manage-projects.ts';
import { callerOf, projectOf, requireAdmin, type RouteOptions } from '../../route-context.ts';
import { ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import {
  AuditJson,
  AuditQuery,
  CreateProjectBody,
  CreateTokenBody,
  CreatedTokenJson,
  ProjectJson,
  TokenJson,
  TokenListQuery,
  TokenParams,
  WhoAmIJson,
} from '../../schemas/identity.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

/** A token as listed: never its secret (only its sha256 is stored anyway). */
const presentToken = (t: TokenRecord) => ({
  id: t.id,
  name: t.name,
  admin: t.isAdmin,
  project: t.projectSlug,
  agent: t.agentHandle,
  agentGeneration: t.agentGeneration,
  createdAt: t.createdAt.toISOString(),
  lastUsedAt: t.lastUsedAt?.toISOString() ?? null,
  revokedAt: t.revokedAt?.toISOString() ?? null,
});

const presentProject = (p: ProjectRecord) => ({ id: p.slug, name: p.name, workspace: 'default' });

/** Who the caller is; tokens and the audit log (admin); projects (admin creates, everyone lists what it may see). */
const identityRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, opts) => {
  tagRoutes(app, 'identity');
  const { core, defaultProject } = opts;

  app.get('/whoami', { schema: { headers: ProjectHeader, response: { 200: WhoAmIJson, '4xx': ErrorBody } } }, async (request) => {
    const caller = callerOf(request);
    return {
      tokenId: caller.tokenId,
      admin: caller.admin,
      agent: caller.agent?.handle ?? null,
      project: projectOf(request, defaultProject),
    };
  });

  app.post(
    '/tokens',
    { schema: { headers: ProjectHeader, body: CreateTokenBody, response: { 201: CreatedTokenJson, '4xx': ErrorBody } } },
    async (request, reply) => {
      requireAdmin(request);
      const b = request.body;
      if (b.admin && (b.agent !== undefined || b.project !== undefined)) {
        throw new BatonError('validation_failed', 'an admin token is bound to no agent and no project; give admin or agent, not both');
      }
      if (!b.admin && b.agent === undefined)
        throw new BatonError('validation_failed', 'body/agent is required: the agent the token acts as');
      const { token, record } = await createToken(core, {
        admin: b.admin === true,
        agent: b.agent,
        project: b.admin ? undefined : (b.project ?? projectOf(request, defaultProject)),
        name: b.name,
      });
      return reply.status(201).send({ token, record: presentToken(record) });
    },
  );

  app.get(
    '/tokens',
    {
      schema: {
        headers: ProjectHeader,
        querystring: TokenListQuery,
        response: { 200: Type.Object({ items: Type.Array(TokenJson) }), '4xx': ErrorBody },
      },
    },
    async (request) => {
      requireAdmin(request);
      // The request's project unless every token is asked for (admin tokens belong to none).
      const project = request.query.all === 'true' ? undefined : (request.query.project ?? projectOf(request, defaultProject));
      return { items: (await listTokens(core, project)).map(presentToken) };
    },
  );

  app.delete(
    '/tokens/:id',
    { schema: { params: TokenParams, response: { 204: Type.Null(), '4xx': ErrorBody } } },
    async (request, reply) => {
      // A token may always revoke itself (a leaked agent token is retired by its agent too).
      if (request.params.id !== callerOf(request).tokenId) requireAdmin(request);
      await revokeToken(core, request.params.id);
      return reply.status(204).send(null);
    },
  );

  app.get(
    '/audit',
    { schema: { querystring: AuditQuery, response: { 200: Type.Object({ items: Type.Array(AuditJson) }), '4xx': ErrorBody } } },
    async (request) => {
      requireAdmin(request);
      const rows = await core.audit.list(
        request.query.token ?? null,
        request.query.limit === undefined ? 100 : Number(request.query.limit),
      );
      return {
        items: rows.map((r) => ({
          seq: r.id.toString(),
          tokenId: r.tokenId,
          project: r.project,
          method: r.method,
          route: r.route,
          params: r.params,
          status: r.status,
          at: r.at.toISOString(),
        })),
      };
    },
  );

  app.post(
    '/projects',
    { schema: { body: CreateProjectBody, response: { 201: ProjectJson, '4xx': ErrorBody } } },
    async (request, reply) => {
      requireAdmin(request);
      return reply.status(201).send(presentProject(await createProject(core, { slug: request.body.id, name: request.body.name })));
    },
  );

  app.get(
    '/projects',
    { schema: { response: { 200: Type.Object({ items: Type.Array(ProjectJson) }), '4xx': ErrorBody } } },
    async (request) => {
      const caller = callerOf(request);
      const all = await listProjects(core);
      return { items: all.filter((p) => caller.admin || p.slug === caller.projectSlug).map(presentProject) };
    },
  );
};

export default identityRoutes;
