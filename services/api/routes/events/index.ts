import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { BatonError } from '../../../../libs/domain/errors.ts';
import { isSettled } from '../../../../libs/domain/delivery-states.ts';
import type { LoggedEvent } from '../../../../libs/db/event-log-repository.ts';
import { followEvents, type EventFeed, type Following } from '../../../../libs/handoffs/event-feed.ts';
import { NO_STORE } from '../../plugins/no-store.ts';
import { projectOf, viewerOf, type RouteOptions } from '../../route-context.ts';
import { ErrorBody, Id, ProjectHeader } from '../../schemas.ts';

/** An SSE comment this often keeps proxies and clients from timing the stream out. */
export const HEARTBEAT_MS = 15_000;
/** What a browser's EventSource waits before it reconnects (sent as `retry:`). */
const RETRY_MS = 2_000;

const EventId = Type.String({ pattern: '^[0-9]{1,19}$', maxLength: 19 });
const EventsQuery = Type.Object(
  {
    after: Type.Optional(EventId),
    handoff: Type.Optional(Id),
    all_owners: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])),
  },
  { additionalProperties: false },
);
// One object, not an intersection: the OpenAPI document lists each header as a parameter.
const EventsHeaders = Type.Object({ ...ProjectHeader.properties, 'last-event-id': Type.Optional(EventId) });

/** The `event:` of each message: a delivery move, or a work move (libs/handoffs README, the two state machines). */
export type FeedEventType = 'delivery' | 'work';

/** The `data:` of each message (docs/API.md, "Events"). */
export function presentFeedEvent(e: LoggedEvent) {
  return {
    id: e.id.toString(),
    handoffId: e.handoffId,
    event: e.event,
    from: e.fromState,
    to: e.toState,
    workFrom: e.workFromState,
    workTo: e.workToState,
    settled: isSettled(e.toState),
    title: e.title,
    sender: e.senderHandle,
    recipient: e.recipientHandle,
    actor: { kind: e.actorKind, id: e.actorId },
    reason: e.reason,
    at: e.createdAt.toISOString(),
  };
}

function sseMessage(e: LoggedEvent): string {
  const type: FeedEventType = e.workToState !== null ? 'work' : 'delivery';
  return `id: ${e.id}\nevent: ${type}\ndata: ${JSON.stringify(presentFeedEvent(e))}\n\n`;
}

const eventRoutes: FastifyPluginAsyncTypebox<RouteOptions & { feed: EventFeed | undefined }> = async (app, opts) => {
  const feed = opts.feed;
  // Followers hold their responses open: end them when the app closes, or close() would wait.
  app.addHook('preClose', (done) => {
    feed?.close();
    done();
  });

  app.get(
    '/events',
    {
      schema: {
        description:
          'Server-sent events (text/event-stream) of the delivery and work transitions the caller may see. Resume with the Last-Event-ID header (or ?after=); ?handoff= follows one handoff.',
        headers: EventsHeaders,
        querystring: EventsQuery,
        response: { 200: Type.String({ description: 'text/event-stream: `id:` the event id, `event:` delivery or work, `data:` JSON' }), '4xx': ErrorBody, 503: ErrorBody },
      },
    },
    async (request, reply) => {
      if (!feed) throw new BatonError('events_unavailable', 'this API process serves no event stream');
      const viewer = viewerOf(request, request.query.all_owners);
      const header = request.headers['last-event-id'];
      // A reconnecting EventSource sends the header while its URL still carries the first ?after=.
      const resumeFrom = typeof header === 'string' && header !== '' ? header : request.query.after;
      if (resumeFrom !== undefined && BigInt(resumeFrom) > 9223372036854775807n) throw new BatonError('validation_failed', 'Last-Event-ID is not an event id');
      const raw = reply.raw;
      let following: Following | null = null;
      let heartbeat: NodeJS.Timeout | null = null;
      let ended = false;
      // What arrives before the headers are out waits here (the catch-up may be quicker).
      let early: string[] | null = [];
      const finish = () => {
        if (ended) return;
        ended = true;
        following?.stop();
        if (heartbeat) clearInterval(heartbeat);
        if (early === null && !raw.writableEnded) raw.end();
      };
      // Errors before the first byte (an unknown or invisible handoff) are ordinary JSON errors.
      following = await followEvents(opts.core, feed, {
        projectSlug: projectOf(request, opts.defaultProject),
        viewer,
        handoffId: request.query.handoff ?? null,
        after: resumeFrom === undefined ? null : BigInt(resumeFrom),
        deliver: (events) => {
          if (ended) return;
          const text = events.map(sseMessage).join('');
          if (early) early.push(text);
          else raw.write(text);
        },
        end: (err) => {
          if (err) request.log.warn({ err }, 'event follower ended: the event log could not be read');
          finish();
        },
      });
      reply.hijack();
      raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': NO_STORE,
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      // `id:` alone sets the client's resume point: a reconnect before any event resumes here.
      raw.write(`retry: ${RETRY_MS}\nid: ${following.after}\n\n${early.join('')}`);
      early = null;
      if (ended) {
        raw.end();
        return;
      }
      heartbeat = setInterval(() => raw.write(': heartbeat\n\n'), HEARTBEAT_MS);
      heartbeat.unref();
      // The client went away (or the socket failed): stop following, drop the timer.
      raw.on('close', finish);
    },
  );
};

export default eventRoutes;
