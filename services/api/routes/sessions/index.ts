import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { addFact, createSession, listSessions, showSession } from '../../../../libs/handoffs/manage-sessions.ts';
import type { FactRecord, SessionRecord } from '../../../../libs/db/session-repository.ts';
import { actingAs, pageLimit, projectOf, viewerOf, type RouteOptions } from '../../route-context.ts';
import { AllOwnersQuery, ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import {
  FactBody,
  FactJson,
  SessionBody,
  SessionDetailJson,
  SessionJson,
  SessionListJson,
  SessionListQuery,
  SessionParams,
} from '../../schemas/sessions.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

const session = (s: SessionRecord) => ({ id: s.id, title: s.title, summary: s.summary, createdAt: s.createdAt.toISOString() });
const fact = (f: FactRecord) => ({
  id: f.id,
  kind: f.kind,
  text: f.text,
  author: f.authorHandle,
  supersedes: f.supersedesId,
  supersededBy: f.supersededById,
  createdAt: f.createdAt.toISOString(),
});

/** Tracked sessions and their facts. */
const sessionRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, opts) => {
  tagRoutes(app, 'sessions');
  const { core, defaultProject } = opts;

  app.post(
    '/sessions',
    { schema: { headers: ProjectHeader, body: SessionBody, response: { 201: SessionJson, '4xx': ErrorBody } } },
    async (request, reply) => {
      const b = request.body;
      const s = await createSession(core, {
        project: projectOf(request, defaultProject),
        as: actingAs(request, b.as),
        title: b.title,
        summary: b.summary,
      });
      return reply.status(201).send(session(s));
    },
  );

  app.get(
    '/sessions',
    { schema: { headers: ProjectHeader, querystring: SessionListQuery, response: { 200: SessionListJson, '4xx': ErrorBody } } },
    async (request) => {
      const items = await listSessions(
        core,
        projectOf(request, defaultProject),
        viewerOf(request, request.query.all_owners),
        pageLimit(request.query.limit),
      );
      return { items: items.map((s) => ({ ...s, createdAt: s.createdAt.toISOString() })) };
    },
  );

  app.get(
    '/sessions/:id',
    {
      schema: {
        headers: ProjectHeader,
        params: SessionParams,
        querystring: AllOwnersQuery,
        response: { 200: SessionDetailJson, '4xx': ErrorBody },
      },
    },
    async (request) => {
      const d = await showSession(core, projectOf(request, defaultProject), request.params.id, viewerOf(request, request.query.all_owners));
      return {
        session: session(d.session),
        facts: d.facts.map(fact),
        handoffs: d.handoffs.map((h) => ({ ...h, createdAt: h.createdAt.toISOString() })),
      };
    },
  );

  app.post(
    '/sessions/:id/facts',
    { schema: { headers: ProjectHeader, params: SessionParams, body: FactBody, response: { 201: FactJson, '4xx': ErrorBody } } },
    async (request, reply) => {
      const f = await addFact(core, {
        project: projectOf(request, defaultProject),
        sessionId: request.params.id,
        as: actingAs(request, request.body.as),
        kind: request.body.kind,
        text: request.body.text,
        supersedes: request.body.supersedes,
      });
      return reply.status(201).send(fact(f));
    },
  );
};

export default sessionRoutes;
