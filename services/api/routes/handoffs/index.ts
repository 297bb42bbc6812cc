import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { BatonError } from '../../../../libs/domain/errors.ts';
import type { DeliveryState } from '../../../../libs/domain/delivery-states.ts';
import { isDeliveryState } from '../../../../libs/domain/delivery-states.ts';
import { parseTimestamp } from '../../../../libs/domain/timestamps.ts';
import { getHandoff, listHandoffs } from '../../../../libs/handoffs/query-handoffs.ts';
import { acknowledgeHandoff, releaseHandoff } from '../../../../libs/handoffs/act-on-handoff.ts';
import { sendHandoff } from '../../../../libs/handoffs/send-handoff.ts';
import { presentAttempt, presentEvent, presentHandoff } from '../../present.ts';
import { presentHandoffUsage } from '../../present-usage.ts';
import { handoffUsage } from '../../../../libs/handoffs/turn-usage.ts';
import { actingAs, actorOf, callerOf, pageLimit, projectOf, viewerOf, type RouteOptions } from '../../route-context.ts';
import { AllOwnersQuery, ErrorBody, HandoffJson, HandoffParams, ProjectHeader } from '../../schemas/common.ts';
import {
  ActAsBody,
  HandoffDetailJson,
  HandoffPageJson,
  ListHandoffsQuery,
  ReleaseBody,
  SendHandoffBody,
  SendHandoffHeaders,
} from '../../schemas/handoffs.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

function parseStates(raw: string | undefined): DeliveryState[] | undefined {
  if (raw === undefined) return undefined;
  const states = raw.split(',');
  const bad = states.find((s) => !isDeliveryState(s));
  if (bad !== undefined) throw new BatonError('validation_failed', `querystring/state ${JSON.stringify(bad)} is not a delivery state`);
  return states as DeliveryState[];
}

const handoffRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, opts) => {
  tagRoutes(app, 'handoffs');
  const { core, defaultProject } = opts;

  app.post(
    '/handoffs',
    {
      schema: {
        headers: SendHandoffHeaders,
        body: SendHandoffBody,
        response: { 200: HandoffJson, 201: HandoffJson, '4xx': ErrorBody },
      },
    },
    async (request, reply) => {
      const b = request.body;
      if (b.dueAt && b.dueMinutes !== undefined) {
        throw new BatonError('validation_failed', 'body has both dueAt and dueMinutes; give one');
      }
      const headerKey = request.headers['idempotency-key'];
      if (headerKey !== undefined && b.idempotencyKey !== undefined && headerKey !== b.idempotencyKey) {
        throw new BatonError('validation_failed', 'the Idempotency-Key header and body idempotencyKey differ');
      }
      const now = core.clock.now();
      let dueAt: Date | null = b.dueMinutes !== undefined ? new Date(now.getTime() + b.dueMinutes * 60_000) : null;
      if (b.dueAt) {
        dueAt = parseTimestamp(b.dueAt);
        if (!dueAt)
          throw new BatonError(
            'validation_failed',
            'body/dueAt must be an ISO 8601 time that exists (2026-12-01T09:00:00Z), from 1970 to 9999',
          );
      }
      const { handoff, created } = await sendHandoff(core, {
        project: projectOf(request, defaultProject),
        from: actingAs(request, b.from, 'from'),
        tokenId: callerOf(request).tokenId,
        to: b.to,
        sessionId: b.session ?? null,
        message: b.message,
        title: b.title,
        focus: b.focus,
        doneWhen: b.doneWhen,
        context: b.context,
        dueAt,
        idempotencyKey: b.idempotencyKey ?? headerKey ?? null,
      });
      return reply.status(created ? 201 : 200).send(presentHandoff(handoff));
    },
  );

  app.get(
    '/handoffs',
    { schema: { headers: ProjectHeader, querystring: ListHandoffsQuery, response: { 200: HandoffPageJson, '4xx': ErrorBody } } },
    async (request) => {
      const q = request.query;
      if ((q.recipient && q.to && q.recipient !== q.to) || (q.sender && q.from && q.sender !== q.from)) {
        throw new BatonError('validation_failed', 'querystring names two different recipients or senders');
      }
      const viewer = viewerOf(request, q.all_owners);
      const page = await listHandoffs(core, {
        project: projectOf(request, defaultProject),
        recipient: q.recipient ?? q.to,
        sender: q.sender ?? q.from,
        states: parseStates(q.state),
        limit: pageLimit(q.limit),
        cursor: q.cursor,
        viewer,
        // Only an admin is told how many it does not see (see GET /v1/status).
        countHidden: callerOf(request).admin && !viewer.allOwners,
      });
      return {
        items: page.items.map(presentHandoff),
        nextCursor: page.nextCursor,
        ...(page.hidden !== undefined ? { hidden: page.hidden } : {}),
      };
    },
  );

  app.get(
    '/handoffs/:id',
    {
      schema: {
        headers: ProjectHeader,
        params: HandoffParams,
        querystring: AllOwnersQuery,
        response: { 200: HandoffDetailJson, '4xx': ErrorBody },
      },
    },
    async (request) => {
      const d = await getHandoff(core, projectOf(request, defaultProject), request.params.id, viewerOf(request, request.query.all_owners));
      const usage = await handoffUsage(core, d.handoff.id);
      return {
        ...presentHandoff(d.handoff),
        attempts: d.attempts.map(presentAttempt),
        usage: presentHandoffUsage(usage),
        events: d.events.map(presentEvent),
        notifications: d.notifications.map((n) => ({
          kind: n.kind,
          text: n.text,
          to: n.agentHandle,
          createdAt: n.createdAt.toISOString(),
        })),
      };
    },
  );

  app.post(
    '/handoffs/:id/acknowledge',
    { schema: { headers: ProjectHeader, params: HandoffParams, body: ActAsBody, response: { 200: HandoffJson, '4xx': ErrorBody } } },
    async (request) =>
      presentHandoff(
        await acknowledgeHandoff(core, {
          project: projectOf(request, defaultProject),
          id: request.params.id,
          ...actorOf(request, request.body.as),
        }),
      ),
  );

  app.post(
    '/handoffs/:id/release',
    {
      schema: {
        headers: ProjectHeader,
        params: HandoffParams,
        querystring: AllOwnersQuery,
        body: ReleaseBody,
        response: { 200: HandoffJson, '4xx': ErrorBody },
      },
    },
    async (request) => {
      // An admin without `as` releases as an operator, what it may see; everyone else as the sender.
      const caller = callerOf(request);
      const viewer = viewerOf(request, request.query.all_owners);
      return presentHandoff(
        await releaseHandoff(core, {
          project: projectOf(request, defaultProject),
          id: request.params.id,
          as: caller.admin && request.body.as === undefined ? undefined : actingAs(request, request.body.as),
          reason: request.body.reason,
          tokenId: caller.tokenId,
          viewer,
        }),
      );
    },
  );
};

export default handoffRoutes;
