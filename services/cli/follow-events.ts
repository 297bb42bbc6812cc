import { ApiError, ApiUnreachable, type ApiClient } from '../../libs/api-client/api-client.ts';
import { localTime } from './format.ts';
import { CLI_DEFAULTS } from '../../libs/config/component-defaults.ts';

/** The `data:` of one `GET /v1/events` message (docs/API.md, "Events"). */
export interface FeedEventJson {
  id: string;
  handoffId: string;
  event: string;
  from: string | null;
  to: string;
  workFrom: string | null;
  workTo: string | null;
  settled: boolean;
  title: string | null;
  sender: string;
  recipient: string | null;
  actor: { kind: string; id: string | null };
  reason: string | null;
  at: string;
}

export interface SseMessage {
  id: string | undefined;
  event: string;
  data: string;
}

/**
 * Parses a text/event-stream body into messages (comments and `retry:` are skipped).
 * `onBytes` is told whenever anything arrives, comments (the server's heartbeats) included.
 */
export async function* readSse(body: ReadableStream<Uint8Array>, onBytes?: () => void): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = '';
  let id: string | undefined;
  let event = 'message';
  let data: string[] = [];
  let idLine = false;
  for await (const chunk of body) {
    onBytes?.();
    buffer += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl).replace(/\r$/, '');
      buffer = buffer.slice(nl + 1);
      if (line === '') {
        // A message of only `id:` moves the resume point without an event (data '').
        if (data.length > 0 || idLine) yield { id, event, data: data.join('\n') };
        event = 'message';
        data = [];
        idLine = false;
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') {
        id = value;
        idLine = true;
      } else if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
  }
}

export interface FollowOptions {
  /** One handoff's events (from its first one); otherwise every visible event from now. */
  readonly handoff?: string;
  /** Admins: every handoff of the project (`all_owners=true`). */
  readonly allOwners?: boolean;
  /** Resume after this event id. */
  readonly after?: string;
  readonly signal: AbortSignal;
  /** Each event once, in order; return true to stop following. */
  onEvent(e: FeedEventJson): boolean | void;
  /** Told when the stream broke and is being reopened (with Last-Event-ID). */
  onReconnect?: (reason: string) => void;
  /** Wait before reopening (default CLI_DEFAULTS.streamReconnectMs, 1 s). */
  readonly reconnectMs?: number;
  /**
   * A stream silent this long is taken as broken (a half-open socket, a stalled proxy) and
   * reopened. The server writes a heartbeat every 15 s; default CLI_DEFAULTS.streamIdleMs, 45 s (three missed).
   */
  readonly idleMs?: number;
}

/**
 * Follows `GET /v1/events`, reopening the stream with `Last-Event-ID` whenever it breaks (the
 * API restarted, the network dropped): the server resumes from its event log, so nothing is
 * missed or repeated. Returns when `onEvent` says stop or `signal` aborts. A refusal (4xx) is
 * thrown as ApiError; an unreachable API or a 503 is retried.
 */
export async function followEvents(client: ApiClient, opts: FollowOptions): Promise<void> {
  let last = opts.after ?? (opts.handoff !== undefined ? '0' : undefined);
  const idleMs = opts.idleMs ?? CLI_DEFAULTS.streamIdleMs;
  while (!opts.signal.aborted) {
    const query = new URLSearchParams();
    if (opts.handoff !== undefined) query.set('handoff', opts.handoff);
    if (opts.allOwners) query.set('all_owners', 'true');
    let reason = 'the stream ended';
    // One controller per connection, linked to the caller's signal only while it lives: a
    // reconnect never leaves a listener behind on the caller's signal.
    const connection = new AbortController();
    const onAbort = () => connection.abort(opts.signal.reason);
    opts.signal.addEventListener('abort', onAbort, { once: true });
    let idle: NodeJS.Timeout | undefined;
    const heard = () => {
      clearTimeout(idle);
      idle = setTimeout(() => connection.abort(new Error(`nothing arrived for ${idleMs} ms`)), idleMs);
      idle.unref();
    };
    try {
      heard();
      const res = await client.openStream(
        `/v1/events${query.size > 0 ? `?${query}` : ''}`,
        last !== undefined ? { 'last-event-id': last } : {},
        connection.signal,
      );
      if (!res.body) throw new Error('the event stream has no body');
      for await (const msg of readSse(res.body, heard)) {
        if (msg.id !== undefined) last = msg.id;
        if (msg.data === '') continue;
        if (opts.onEvent(JSON.parse(msg.data) as FeedEventJson) === true) return;
      }
    } catch (err) {
      if (opts.signal.aborted) return;
      if (err instanceof ApiError && err.status !== 503) throw err;
      const silent = connection.signal.aborted ? (connection.signal.reason as Error) : null;
      reason = silent
        ? `the stream went silent (${silent.message})`
        : err instanceof ApiError || err instanceof ApiUnreachable
          ? err.message
          : `the stream broke (${(err as Error).message})`;
    } finally {
      clearTimeout(idle);
      opts.signal.removeEventListener('abort', onAbort);
      connection.abort();
    }
    opts.onReconnect?.(reason);
    await sleep(opts.reconnectMs ?? CLI_DEFAULTS.streamReconnectMs, opts.signal);
  }
}

/** Waits `ms`, or less if `signal` aborts; leaves no listener behind either way. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * What a settled handoff's final state means as an exit code (`baton send --wait`, `baton watch
 * ID`): 0 the outcome came back, otherwise which way it ended. Documented in services/cli/README.md.
 */
export const OUTCOME_EXIT = { RETURNED: 0, ACKNOWLEDGED: 0, FAILED: 3, CANCELLED: 4, UNAVAILABLE: 5, DUPLICATE: 6, timeout: 7 } as const;

/** The exit code for a final delivery state (an unknown one counts as failed). */
export function exitCodeFor(state: string): number {
  return (OUTCOME_EXIT as Record<string, number>)[state] ?? OUTCOME_EXIT.FAILED;
}

/** Ends the command with an outcome's exit code (runCli returns it) after its output was printed. */
export class OutcomeExit extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
    this.name = 'OutcomeExit';
  }
}

/** One event as a plain line: local time, handoff, move, event, who, title. */
export function eventLine(e: FeedEventJson): string {
  const move = e.workTo !== null ? `work ${e.workFrom ?? '-'} -> ${e.workTo}` : `${e.from ?? '-'} -> ${e.to}`;
  const who = e.actor.id ? `${e.actor.kind}:${e.actor.id}` : e.actor.kind;
  const label = e.title ?? '';
  return `${localTime(e.at)}  ${e.handoffId}  ${move.padEnd(28)} ${e.event} by ${who}  ${e.sender} -> ${e.recipient ?? '(project)'}${label ? `  ${label}` : ''}`;
}
