import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { HandoffView } from '../../../../libs/db/records.ts';
import { getLiveView, type LiveViewDeps } from '../../../../libs/handoffs/live-view.ts';
import { LIMITS } from '../../../../libs/domain/limits.ts';
import { projectOf, viewerOf, type RouteOptions } from '../../route-context.ts';
import { AllOwnersQuery, DeliveryStateSchema, ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import { poolName } from '../../../../libs/domain/ids.ts';
import { tagRoutes } from '../../plugins/openapi.ts';
import { UsageTotalsJson } from '../../schemas/usage.ts';
import { presentUsageTotals } from '../../present-usage.ts';

const Timestamp = Type.String({ format: 'date-time' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

const LiveHandoffJson = Type.Object({
  id: Type.String(),
  from: Type.String(),
  to: Type.Union([Type.String(), Type.Null()]),
  title: Type.Union([Type.String(), Type.Null()]),
  state: DeliveryStateSchema,
  workState: Type.Union([Type.String(), Type.Null()]),
  dueAt: NullableTimestamp,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const Figures = Type.Object({
  count: Type.Integer(),
  p50Ms: Type.Union([Type.Integer(), Type.Null()]),
  p90Ms: Type.Union([Type.Integer(), Type.Null()]),
});

const LiveJson = Type.Object({
  project: Type.String(),
  at: Timestamp,
  lastEventId: Type.String({ description: 'follow GET /v1/events from here (Last-Event-ID or ?after=)' }),
  agents: Type.Array(
    Type.Object({
      id: Type.String(),
      displayName: Type.String(),
      provider: Type.String(),
      pool: Type.String(),
      activity: Type.Union([Type.Literal('busy'), Type.Literal('idle'), Type.Literal('attention')]),
      live: Type.Integer(),
      queued: Type.Integer(),
      attention: Type.Integer(),
      usage: Type.Union([Type.Object({ today: UsageTotalsJson, lastHour: UsageTotalsJson }), Type.Null()], {
        description:
          'what its turns used today (UTC) and in the last hour; null where the caller may not see it (an agent sees its own only)',
      }),
    }),
  ),
  inFlight: Type.Array(LiveHandoffJson),
  recentlySettled: Type.Array(LiveHandoffJson),
  attention: Type.Array(
    Type.Intersect([
      LiveHandoffJson,
      Type.Object({
        reasons: Type.Array(Type.Union([Type.Literal('uncertain'), Type.Literal('held'), Type.Literal('overdue'), Type.Literal('failed')])),
      }),
    ]),
  ),
  deliveryTimes: Type.Object({ windowSeconds: Type.Integer(), accepted: Figures, returned: Figures }),
  perMinute: Type.Array(
    Type.Object({
      at: Timestamp,
      settled: Type.Record(Type.String(), Type.Integer(), {
        description: 'handoffs whose delivery settled in this minute, by the state they settled in',
      }),
      returned: Figures,
    }),
    {
      description: `the last ${LIMITS.liveChartMinutes} minutes, oldest first (the current one last), among the newest ${LIMITS.liveSample} handoffs the caller may see: what settled in each, and send → returned p50/p90 of what returned in it`,
    },
  ),
  perMinuteSampleFull: Type.Boolean({
    description: `true when the caller may see more than the newest ${LIMITS.liveSample} handoffs: perMinute then leaves out what settled among older ones`,
  }),
});

const iso = (d: Date | null) => (d ? d.toISOString() : null);

function presentLiveHandoff(h: HandoffView) {
  return {
    id: h.id,
    from: h.senderHandle,
    to: h.recipientHandle,
    title: h.title,
    state: h.deliveryState,
    workState: h.workState,
    dueAt: iso(h.dueAt),
    createdAt: h.createdAt.toISOString(),
    updatedAt: h.updatedAt.toISOString(),
  };
}

/**
 * `GET /v1/live`: the live page's first paint in one call (agents and what they do, open
 * handoffs, what needs attention, delivery times), all of it through the visibility rule, and
 * the event id to follow `GET /v1/events` from.
 */
const liveRoutes: FastifyPluginAsyncTypebox<RouteOptions<LiveViewDeps>> = async (app, opts) => {
  tagRoutes(app, 'views');
  app.get(
    '/live',
    {
      schema: {
        description:
          'What the live page (/ui/) shows at first paint, as far as the caller may see: agents (busy, idle, ' +
          'attention), open handoffs, what needs attention, delivery times p50/p90, and the last hour per ' +
          'minute (settled by outcome, send → returned p50/p90).',
        headers: ProjectHeader,
        querystring: AllOwnersQuery,
        response: { 200: LiveJson, '4xx': ErrorBody },
      },
    },
    async (request) => {
      const v = await getLiveView(opts.core, projectOf(request, opts.defaultProject), viewerOf(request, request.query.all_owners));
      return {
        project: v.project,
        at: v.at.toISOString(),
        lastEventId: v.lastEventId.toString(),
        agents: v.agents.map((a) => ({
          id: a.agent.handle,
          displayName: a.agent.displayName,
          provider: a.agent.provider,
          pool: poolName(a.agent.pool),
          activity: a.activity,
          live: a.live,
          queued: a.queued,
          attention: a.attention,
          usage: a.usage ? { today: presentUsageTotals(a.usage.today), lastHour: presentUsageTotals(a.usage.lastHour) } : null,
        })),
        inFlight: v.inFlight.map(presentLiveHandoff),
        recentlySettled: v.recentlySettled.map(presentLiveHandoff),
        attention: v.attention.map((a) => ({ ...presentLiveHandoff(a.handoff), reasons: a.reasons })),
        deliveryTimes: {
          windowSeconds: Math.round(v.deliveryTimes.windowMs / 1000),
          accepted: v.deliveryTimes.accepted,
          returned: v.deliveryTimes.returned,
        },
        perMinute: v.perMinute.minutes.map((m) => ({ at: m.at.toISOString(), settled: m.settled, returned: m.returned })),
        perMinuteSampleFull: v.perMinute.sampleFull,
      };
    },
  );
};

export default liveRoutes;
