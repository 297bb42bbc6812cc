import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import {
  createSubscription,
  listSubscriptions,
  removeSubscription,
  replaySubscription,
  resumeSubscription,
  showSubscription,
  type SubscriptionDeps,
  type SubscriptionOwner,
} from '../../../../libs/handoffs/manage-subscriptions.ts';
import type { SubscriptionRecord } from '../../../../libs/db/subscription-repository.ts';
import { callerOf, pageLimit, projectOf, type RouteOptions } from '../../route-context.ts';
import { ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import {
  CreatedSubscriptionJson,
  ReplayBody,
  ReplayJson,
  ResumeBody,
  SubscriptionBody,
  SubscriptionDetailJson,
  SubscriptionListJson,
  SubscriptionListQuery,
  SubscriptionOnlyJson,
  SubscriptionParams,
} from '../../schemas/subscriptions.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

/** The JSON of a subscription: never its secret. */
const subscription = (s: SubscriptionRecord) => ({
  id: s.id,
  url: s.url,
  owner: s.ownerHandle,
  filter: {
    ...(s.filter.handoffId !== undefined ? { handoffId: s.filter.handoffId } : {}),
    ...(s.filter.agents ? { agents: [...s.filter.agents] } : {}),
    ...(s.filter.states ? { states: [...s.filter.states] } : {}),
    ...(s.filter.events ? { events: [...s.filter.events] } : {}),
  },
  kind: s.kind,
  status: s.status,
  pausedReason: s.pausedReason,
  position: s.position.toString(),
  attempts: s.attempts,
  failingSince: s.failingSince?.toISOString() ?? null,
  nextAttemptAt: s.nextAttemptAt?.toISOString() ?? null,
  lastError: s.lastError,
  deadLetters: s.deadLetters,
  createdAt: s.createdAt.toISOString(),
});

/**
 * An agent token manages its own subscriptions; an admin token every subscription of the project,
 * unless it acts for an agent (`X-Baton-Agent`, as an MCP session of an admin token does): then
 * that agent's own, as the agent's token would.
 */
function ownerOf(request: FastifyRequest): SubscriptionOwner {
  const caller = callerOf(request);
  const agent = caller.agent ?? (caller.admin ? request.viewAs : undefined);
  return agent ? { admin: false, agentId: agent.id } : { admin: true };
}

/** Signed event subscriptions: where Baton POSTs the project's handoff events. */
const subscriptionRoutes: FastifyPluginAsyncTypebox<RouteOptions<SubscriptionDeps>> = async (app, opts) => {
  tagRoutes(app, 'subscriptions');
  const { core, defaultProject } = opts;

  app.post(
    '/subscriptions',
    { schema: { headers: ProjectHeader, body: SubscriptionBody, response: { 201: CreatedSubscriptionJson, '4xx': ErrorBody } } },
    async (request, reply) => {
      const b = request.body;
      const created = await createSubscription(core, {
        project: projectOf(request, defaultProject),
        owner: ownerOf(request),
        url: b.url,
        filter: b.filter ?? {},
        after: b.after === undefined ? undefined : BigInt(b.after),
      });
      return reply.status(201).send({ subscription: subscription(created.subscription), secret: created.secret });
    },
  );

  app.get(
    '/subscriptions',
    { schema: { headers: ProjectHeader, querystring: SubscriptionListQuery, response: { 200: SubscriptionListJson, '4xx': ErrorBody } } },
    async (request) => {
      const items = await listSubscriptions(core, projectOf(request, defaultProject), ownerOf(request), pageLimit(request.query.limit));
      return { items: items.map(subscription) };
    },
  );

  app.get(
    '/subscriptions/:id',
    { schema: { headers: ProjectHeader, params: SubscriptionParams, response: { 200: SubscriptionDetailJson, '4xx': ErrorBody } } },
    async (request) => {
      const d = await showSubscription(core, projectOf(request, defaultProject), request.params.id, ownerOf(request), 100);
      return {
        subscription: subscription(d.subscription),
        deadLetters: d.deadLetters.map((l) => ({ ...l, eventId: l.eventId.toString(), createdAt: l.createdAt.toISOString() })),
      };
    },
  );

  app.delete(
    '/subscriptions/:id',
    { schema: { headers: ProjectHeader, params: SubscriptionParams, response: { 204: Type.Null(), '4xx': ErrorBody } } },
    async (request, reply) => {
      await removeSubscription(core, projectOf(request, defaultProject), request.params.id, ownerOf(request));
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/subscriptions/:id/replay',
    { schema: { headers: ProjectHeader, params: SubscriptionParams, body: ReplayBody, response: { 200: ReplayJson, '4xx': ErrorBody } } },
    async (request) => {
      const r = await replaySubscription(core, {
        project: projectOf(request, defaultProject),
        id: request.params.id,
        owner: ownerOf(request),
        after: request.body.after === undefined ? undefined : BigInt(request.body.after),
      });
      return { subscription: subscription(r.subscription), replayed: r.replayed };
    },
  );

  app.post(
    '/subscriptions/:id/resume',
    {
      schema: {
        headers: ProjectHeader,
        params: SubscriptionParams,
        body: ResumeBody,
        response: { 200: SubscriptionOnlyJson, '4xx': ErrorBody },
      },
    },
    async (request) => {
      const s = await resumeSubscription(core, projectOf(request, defaultProject), request.params.id, ownerOf(request));
      return { subscription: subscription(s) };
    },
  );
};

export default subscriptionRoutes;
