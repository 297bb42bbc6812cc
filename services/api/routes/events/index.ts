import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { ServerResponse } from 'node:http';
import { BatonError, ERROR_CATALOG } from '../../../../libs/domain/errors.ts';
import { isSettled } from '../../../../libs/domain/delivery-states.ts';
import type { LoggedEvent } from '../../../../libs/db/event-log-repository.ts';
import { followEvents, type EventFeed, type Following } from '../../../../libs/handoffs/event-feed.ts';
import type { LoadDeps } from '../../../../libs/handoffs/load-handoff.ts';
import type { AuthDeps } from '../../../../libs/handoffs/manage-tokens.ts';
import { NO_STORE } from '../../plugins/no-store.ts';
import { proveCaller } from '../../plugins/authenticate.ts';
import type { BrowserSessions } from '../../plugins/browser-session.ts';
import { projectOf, viewerOf, type RouteOptions } from '../../route-context.ts';
import { ErrorBody } from '../../schemas/common.ts';
import { EventsHeaders, EventsQuery } from '../../schemas/events.ts';
import { tagRoutes } from '../../plugins/openapi.ts';
import { EVENT_STREAM_DEFAULTS } from '../../../../libs/config/component-defaults.ts';

/** An SSE comment this often keeps proxies and clients from timing the stream out. */
export const HEARTBEAT_MS = EVENT_STREAM_DEFAULTS.heartbeatMs;
/** What a browser's EventSource waits before it reconnects (sent as `retry:`). */
const RETRY_MS = EVENT_STREAM_DEFAULTS.retryMs;

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
    workState: e.workStateNow,
    actor: { kind: e.actorKind, id: e.actorId },
    reason: e.reason,
    at: e.createdAt.toISOString(),
  };
}

function sseMessage(e: LoggedEvent): string {
  const type: FeedEventType = e.workToState !== null ? 'work' : 'delivery';
  return `id: ${e.id}\nevent: ${type}\ndata: ${JSON.stringify(presentFeedEvent(e))}\n\n`;
}

/**
 * Bounds of one stream (docs/API.md, "Events"): what it may hold for a client that reads too
 * slowly, and how often its caller is proven again.
 */
export interface EventStreamLimits {
  /**
   * Bytes a stream may have written but its client not yet read: past them its next events end
   * it with its resume id instead (a catch-up page may go past it once).
   */
  readonly maxBufferBytes: number;
  /** How long a stream waits for its client to read before the next page of a catch-up; past it, ended. */
  readonly slowReaderMs: number;
  /** How often the stream's token (or browser session) is proven again: it ends within this after a revocation. */
  readonly recheckMs: number;
}

export const DEFAULT_EVENT_STREAM_LIMITS: EventStreamLimits = Object.freeze({
  maxBufferBytes: EVENT_STREAM_DEFAULTS.maxBufferBytes,
  slowReaderMs: EVENT_STREAM_DEFAULTS.slowReaderMs,
  recheckMs: EVENT_STREAM_DEFAULTS.recheckMs,
});

/** The stream loads the handoff it follows (`followEvents`) and proves its caller again now and then. */
export interface EventRouteOptions extends RouteOptions<LoadDeps & AuthDeps> {
  readonly feed: EventFeed | undefined;
  /** Browser sessions (the live page's stream rides on its cookie): proven again like a token. */
  readonly browser?: BrowserSessions | undefined;
  readonly limits?: EventStreamLimits | undefined;
}

const eventRoutes: FastifyPluginAsyncTypebox<EventRouteOptions> = async (app, opts) => {
  tagRoutes(app, 'events');
  const feed = opts.feed;
  const limits = opts.limits ?? DEFAULT_EVENT_STREAM_LIMITS;
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
          'Server-sent events (text/event-stream) of the delivery and work transitions the caller may see. ' +
          'Resume with the Last-Event-ID header (or ?after=); ?handoff= follows one handoff; ?project= names ' +
          "the project as X-Baton-Project does (for a browser's EventSource, which sends no headers).",
        headers: EventsHeaders,
        querystring: EventsQuery,
        response: {
          200: Type.String({ description: 'text/event-stream: `id:` the event id, `event:` delivery or work, `data:` JSON' }),
          '4xx': ErrorBody,
          503: ErrorBody,
        },
      },
    },
    async (request, reply) => {
      if (!feed) throw new BatonError('events_unavailable', 'this API process serves no event stream');
      const viewer = viewerOf(request, request.query.all_owners);
      const header = request.headers['last-event-id'];
      // A reconnecting EventSource sends the header while its URL still carries the first ?after=.
      const resumeFrom = typeof header === 'string' && header !== '' ? header : request.query.after;
      if (resumeFrom !== undefined && BigInt(resumeFrom) > 9223372036854775807n)
        throw new BatonError('validation_failed', 'Last-Event-ID is not an event id');
      const raw = reply.raw;
      let following: Following | null = null;
      const timers: NodeJS.Timeout[] = [];
      let ended = false;
      // What arrives before the headers are out waits here (the catch-up may be quicker).
      let early: string[] | null = [];
      /** The id of the last event written: where a client resumes after this stream ends. */
      let lastId: string | null = resumeFrom ?? null;
      /** Ends the stream, saying why in a final comment when it is the server that ends it. */
      const finish = (why?: string) => {
        if (ended) return;
        ended = true;
        following?.stop();
        for (const t of timers) clearInterval(t);
        if (early === null && !raw.writableEnded && !raw.destroyed) {
          raw.end(why ? `: end: ${why}\n\n` : undefined);
          // A client that never reads would keep what is buffered for ever: cut it off after a grace.
          if (why) setTimeout(() => raw.destroy(), limits.slowReaderMs).unref();
        }
      };
      const behind = () =>
        `this stream fell more than ${limits.maxBufferBytes} bytes behind its reader; reconnect with Last-Event-ID ${lastId ?? following?.after ?? 0} to go on without a gap`;
      // Attached before anything is awaited: a client that leaves during the set-up (the
      // catch-up read) stops the follower and its timers there and then.
      raw.once('close', () => finish());
      // Errors before the first byte (an unknown or invisible handoff) are ordinary JSON errors.
      following = await followEvents(opts.core, feed, {
        projectSlug: projectOf(request, opts.defaultProject, request.query.project),
        viewer,
        handoffId: request.query.handoff ?? null,
        after: resumeFrom === undefined ? null : BigInt(resumeFrom),
        deliver: (events) => {
          if (ended) return;
          // A reader already this far behind is ended with its resume id (the last event it was
          // written) rather than buffered without bound: it reconnects and loses nothing. A
          // catch-up waits for its reader between pages (`ready`), so at most one page more is held.
          if (early === null && raw.writableLength > limits.maxBufferBytes) {
            finish(behind());
            return;
          }
          const text = events.map(sseMessage).join('');
          if (early) early.push(text);
          else raw.write(text);
          lastId = events[events.length - 1]!.id.toString();
        },
        end: (err) => {
          if (err) request.log.warn({ err }, 'event follower ended: the event log could not be read');
          finish();
        },
        ready: () => readable(raw, limits, () => finish(behind())),
      });
      reply.hijack();
      if (ended) {
        // The client left while the stream was being set up.
        following.stop();
        if (!raw.destroyed) raw.destroy();
        return;
      }
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
      const heartbeat = setInterval(() => raw.write(': heartbeat\n\n'), HEARTBEAT_MS);
      heartbeat.unref();
      timers.push(heartbeat);
      // The stream lives as long as its caller may see it: a revoked token, a removed agent or a
      // browser session that ended (signed out, its hour over) ends it within `recheckMs`.
      const recheck = setInterval(() => {
        proveCaller(request, opts.core, opts.browser).then(
          () => undefined,
          (err: unknown) => {
            if (err instanceof BatonError && ERROR_CATALOG[err.code].status < 500) finish(`${err.code}: ${err.message}`);
            // Postgres or Redis away: the caller is not proven refused; try again at the next check.
          },
        );
      }, limits.recheckMs);
      recheck.unref();
      timers.push(recheck);
    },
  );
};

/**
 * Resolves when the client has read enough of what was written to take another page (its
 * buffer under half the bound), at once if it has; calls `tooSlow` (and resolves) when it has
 * not within `slowReaderMs`, or the stream closed meanwhile.
 */
function readable(raw: ServerResponse, limits: EventStreamLimits, tooSlow: () => void): Promise<void> {
  if (raw.writableLength <= limits.maxBufferBytes / 2 || raw.destroyed) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = (slow: boolean) => {
      clearTimeout(timer);
      raw.off('drain', onDrain);
      raw.off('close', onClose);
      if (slow) tooSlow();
      resolve();
    };
    const onDrain = () => done(false);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(true), limits.slowReaderMs);
    raw.once('drain', onDrain);
    raw.once('close', onClose);
  });
}

export default eventRoutes;
