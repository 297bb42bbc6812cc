import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { contextPacketFor } from '../../../../libs/handoffs/manage-sessions.ts';
import { getBoard, getHandoff, getOutbox } from '../../../../libs/handoffs/query-handoffs.ts';
import { acceptHandoff, cancelHandoff, closeWork, heartbeat, returnWork } from '../../../../libs/handoffs/work-contract.ts';
import { LANES } from '../../../../libs/domain/board.ts';
import { presentHandoff } from '../../present.ts';
import { actingAs, actorOf, callerOf, ownBox, projectOf, viewerOf, type RouteOptions } from '../../route-context.ts';
import { AgentParams, AllOwnersQuery, ErrorBody, HandoffJson, HandoffParams, ProjectHeader } from '../../schemas/common.ts';
import {
  AcceptBody,
  AsQuery,
  BoardJson,
  BoardQuery,
  ClaimJson,
  CloseBody,
  HandoffListJson,
  HeartbeatBody,
  PacketJson,
  ReturnBody,
  ReturnJson,
} from '../../schemas/work.ts';
import { Type } from 'typebox';
import { tagRoutes } from '../../plugins/openapi.ts';

/** Work contracts: accept (claim), heartbeat, return, close, cancel; the packet, outbox and board. */
const workRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, opts) => {
  tagRoutes(app, 'work');
  const { core, defaultProject } = opts;
  const project = (request: Parameters<typeof projectOf>[0]) => projectOf(request, defaultProject);

  app.post(
    '/handoffs/:id/accept',
    { schema: { headers: ProjectHeader, params: HandoffParams, body: AcceptBody, response: { 200: ClaimJson, '4xx': ErrorBody } } },
    async (request) => {
      const c = await acceptHandoff(core, {
        project: project(request),
        id: request.params.id,
        ...actorOf(request, request.body.as),
        leaseMs: request.body.leaseSeconds === undefined ? undefined : request.body.leaseSeconds * 1000,
      });
      return {
        handoff: presentHandoff(c.handoff),
        claim: { token: c.claimToken, attempt: c.attempt, leaseExpiresAt: c.leaseExpiresAt.toISOString() },
        packet: c.packet,
        recovered: c.recovered,
      };
    },
  );

  app.post(
    '/handoffs/:id/heartbeat',
    {
      schema: {
        headers: ProjectHeader,
        params: HandoffParams,
        body: HeartbeatBody,
        response: { 200: Type.Object({ leaseExpiresAt: Type.String() }), '4xx': ErrorBody },
      },
    },
    async (request) => {
      const b = request.body;
      const r = await heartbeat(core, {
        project: project(request),
        id: request.params.id,
        ...actorOf(request, b.as),
        claimToken: b.claimToken,
        leaseMs: b.leaseSeconds === undefined ? undefined : b.leaseSeconds * 1000,
      });
      return { leaseExpiresAt: r.leaseExpiresAt.toISOString() };
    },
  );

  app.post(
    '/handoffs/:id/return',
    { schema: { headers: ProjectHeader, params: HandoffParams, body: ReturnBody, response: { 200: ReturnJson, '4xx': ErrorBody } } },
    async (request) => {
      const b = request.body;
      const r = await returnWork(core, {
        project: project(request),
        id: request.params.id,
        ...actorOf(request, b.as),
        claimToken: b.claimToken,
        revision: b.revision,
        summary: b.summary,
        outcome: b.outcome ?? 'succeeded',
        facts: b.facts,
      });
      return { handoff: presentHandoff(r.handoff), recovered: r.recovered };
    },
  );

  app.post(
    '/handoffs/:id/close',
    { schema: { headers: ProjectHeader, params: HandoffParams, body: CloseBody, response: { 200: HandoffJson, '4xx': ErrorBody } } },
    async (request) =>
      presentHandoff(
        await closeWork(core, {
          project: project(request),
          id: request.params.id,
          ...actorOf(request, request.body.as),
          resolution: request.body.resolution,
          note: request.body.note,
          revision: request.body.revision,
        }),
      ),
  );

  app.post(
    '/handoffs/:id/cancel',
    {
      schema: {
        headers: ProjectHeader,
        params: HandoffParams,
        body: Type.Object({ as: AcceptBody.properties.as }, { additionalProperties: false }),
        response: { 200: HandoffJson, '4xx': ErrorBody },
      },
    },
    async (request) =>
      presentHandoff(
        await cancelHandoff(core, {
          project: project(request),
          id: request.params.id,
          ...actorOf(request, request.body.as),
        }),
      ),
  );

  app.get(
    '/handoffs/:id/packet',
    { schema: { headers: ProjectHeader, params: HandoffParams, querystring: AsQuery, response: { 200: PacketJson, '4xx': ErrorBody } } },
    async (request) => {
      if (request.query.as !== undefined && !callerOf(request).admin) actingAs(request, request.query.as);
      const d = await getHandoff(core, project(request), request.params.id, viewerOf(request, request.query.all_owners));
      return contextPacketFor(core, d.handoff, d.handoff.senderHandle);
    },
  );

  app.get(
    '/agents/:id/outbox',
    {
      schema: {
        headers: ProjectHeader,
        params: AgentParams,
        querystring: AllOwnersQuery,
        response: { 200: HandoffListJson, '4xx': ErrorBody },
      },
    },
    async (request) => {
      const o = await getOutbox(core, project(request), ownBox(request, request.params.id), viewerOf(request, request.query.all_owners));
      return { agent: o.agent, handoffs: o.handoffs.map(presentHandoff) };
    },
  );

  app.get(
    '/board',
    { schema: { headers: ProjectHeader, querystring: BoardQuery, response: { 200: BoardJson, '4xx': ErrorBody } } },
    async (request) => {
      const lanes = await getBoard(core, project(request), viewerOf(request, request.query.all_owners), request.query.agent);
      return Object.fromEntries(
        LANES.map((lane) => [
          lane,
          lanes[lane].map((c) => ({ handoff: presentHandoff(c.handoff), lane: c.card.lane, reasons: c.card.reasons, next: c.card.next })),
        ]),
      ) as never;
    },
  );
};

export default workRoutes;
