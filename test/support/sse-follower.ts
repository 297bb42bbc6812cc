import { readSse, type FeedEventJson } from '../../services/cli/follow-events.ts';
import { eventually } from './eventually.ts';

/** A `GET /v1/events` client over a real socket, keeping what it received. */
export interface SseFollower {
  readonly status: number;
  readonly headers: Headers;
  /** Every event received, in arrival order, with the SSE `id:` and `event:` lines. */
  readonly events: Array<FeedEventJson & { sseId: string; type: string }>;
  /** The last `id:` seen (an id-only line included): where to resume. */
  readonly lastId: () => string | undefined;
  /** Resolves when `check` holds on the events so far. */
  until(check: (events: SseFollower['events']) => boolean, what: string): Promise<void>;
  /** Drops the connection, as a client that goes away. */
  close(): Promise<void>;
}

export async function openEvents(
  baseUrl: string,
  token: string,
  opts: { lastEventId?: string; query?: string; project?: string } = {},
): Promise<SseFollower> {
  const abort = new AbortController();
  const res = await fetch(`${baseUrl}/v1/events${opts.query ? `?${opts.query}` : ''}`, {
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'text/event-stream',
      ...(opts.lastEventId !== undefined ? { 'last-event-id': opts.lastEventId } : {}),
      ...(opts.project ? { 'x-baton-project': opts.project } : {}),
    },
    signal: abort.signal,
  });
  const events: SseFollower['events'] = [];
  let last: string | undefined;
  let reading: Promise<void> = Promise.resolve();
  if (res.status === 200 && res.body) {
    const body = res.body;
    reading = (async () => {
      try {
        for await (const msg of readSse(body)) {
          if (msg.id !== undefined) last = msg.id;
          if (msg.data === '') continue;
          events.push({ ...(JSON.parse(msg.data) as FeedEventJson), sseId: msg.id ?? '', type: msg.event });
        }
      } catch {
        // aborted by close()
      }
    })();
  }
  // The server's first line is `id:` (where this follower starts): wait for it, so lastId() is set.
  if (res.status === 200) await eventually(() => last !== undefined, { what: "the stream's first id line", timeoutMs: 15_000 });
  return {
    status: res.status,
    headers: res.headers,
    events,
    lastId: () => last,
    until: (check, what) => eventually(() => check(events), { what, timeoutMs: 8_000 }).then(() => undefined),
    async close() {
      abort.abort();
      await reading;
    },
  };
}
