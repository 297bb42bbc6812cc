import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A fake model server on 127.0.0.1 for the REAL agent CLIs (Codex, Claude Code) in tests: it
 * speaks both wire protocols (the Anthropic Messages API at POST /v1/messages, the OpenAI
 * Responses API at POST /v1/responses; see ../../../shared/recipes/real-agent-clis.md), answers each
 * request as the test's script says (at once, slowly, with an error, or never), and records
 * every request. It listens on loopback only and refuses any connection from elsewhere.
 */

/** How the fake answers one model request. */
export type FakeBehaviour =
  /**
   * A final assistant message with this text, after `delayMs` and, when given, once `until`
   * settles (a test holds a turn running until it says so).
   */
  | {
      readonly kind: 'reply';
      readonly text: string;
      readonly delayMs?: number;
      readonly until?: Promise<unknown>;
      /** The usage the reply reports (default: 10 input tokens, about a token per 4 characters out, no cache). */
      readonly usage?: FakeUsage;
    }
  /** A call of the tool `name` (the model asks the CLI to run it), e.g. `mcp__baton__send`. */
  | { readonly kind: 'tool_use'; readonly name: string; readonly input: Record<string, unknown> }
  /**
   * An HTTP error (the CLI's turn fails; set the CLI's retries to 0). `errorType` is the error
   * body's type (Anthropic: `rate_limit_error`, `overloaded_error`, ...; default by status) and
   * `headers` go on the response (e.g. `retry-after`). `code` is the Responses error body's code
   * (`context_length_exceeded`, `insufficient_quota`, ...), which Codex classifies by.
   */
  | {
      readonly kind: 'error';
      readonly status: number;
      readonly message?: string;
      readonly errorType?: string;
      readonly code?: string;
      readonly headers?: Readonly<Record<string, string>>;
    }
  /**
   * The stream starts and then fails (Responses: response.failed, with `code` as its error's code,
   * default `server_error`; Anthropic: an error event).
   */
  | { readonly kind: 'stream_error'; readonly message?: string; readonly code?: string }
  /** Accept the request and never answer (until the server closes). */
  | { readonly kind: 'hang' };

/**
 * Token counts a reply reports, in each protocol's own fields: Anthropic's `input_tokens` (not
 * cached), `cache_read_input_tokens`, `cache_creation_input_tokens`, `output_tokens`; the Responses
 * API's `input_tokens` (which counts the cached part too: `input + cacheRead`),
 * `input_tokens_details.cached_tokens` (`cacheRead`) and `output_tokens`.
 */
export interface FakeUsage {
  readonly input: number;
  readonly output: number;
  readonly cacheRead?: number;
  readonly cacheWrite?: number;
}

/** One model request as the fake received it. */
export interface FakeExchange {
  readonly protocol: 'anthropic' | 'responses';
  readonly method: string;
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: unknown;
  /** The text of the last user message (the prompt of this model call). */
  readonly prompt: string;
  /** Every text the request carries, joined (to find a marker anywhere in the conversation). */
  readonly allText: string;
  readonly at: number;
}

/** What a protocol module does with a request once the behaviour is chosen. */
export interface ProtocolHandler {
  readonly protocol: FakeExchange['protocol'];
  /** Whether this handler serves the request (method and path; query strings ignored). */
  matches(method: string, path: string): boolean;
  /** The last user message's text, and all text of the conversation. */
  promptOf(body: unknown): { prompt: string; allText: string };
  /** Writes the answer for `behaviour` (the server has already waited out any delay). */
  answer(res: ServerResponse, body: unknown, behaviour: Exclude<FakeBehaviour, { kind: 'hang' }>): void;
}

export interface FakeModelServer {
  readonly url: string;
  readonly port: number;
  /** Every model request so far, in arrival order. */
  readonly exchanges: readonly FakeExchange[];
  /** Requests that matched no route (answered 404), and connections refused as non-loopback. */
  readonly unmatched: ReadonlyArray<{ method: string; path: string }>;
  readonly refusedConnections: number;
  /** Sets how the next requests are answered (default: reply "done: <first line of the prompt>"). */
  script(choose: (exchange: FakeExchange) => FakeBehaviour): void;
  close(): Promise<void>;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

export function defaultBehaviour(exchange: FakeExchange): FakeBehaviour {
  const first = exchange.prompt.split('\n').find((l) => l.trim() !== '') ?? '';
  return { kind: 'reply', text: `done: ${first.slice(0, 200)}` };
}

/** Starts the fake on a free loopback port with the given protocol handlers. */
export async function startFakeModelServer(handlers: readonly ProtocolHandler[]): Promise<FakeModelServer> {
  const exchanges: FakeExchange[] = [];
  const unmatched: Array<{ method: string; path: string }> = [];
  const hanging = new Set<ServerResponse>();
  let refusedConnections = 0;
  let choose: (exchange: FakeExchange) => FakeBehaviour = defaultBehaviour;
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0] ?? '/';
      const method = req.method ?? 'GET';
      const handler = handlers.find((h) => h.matches(method, path));
      if (!handler) {
        unmatched.push({ method, path });
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { type: 'not_found', message: `no route ${method} ${path}` } }));
        return;
      }
      let body: unknown = null;
      try {
        body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : null;
      } catch {
        res
          .writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { type: 'invalid_request_error', message: 'body is not JSON' } }));
        return;
      }
      const { prompt, allText } = handler.promptOf(body);
      const exchange: FakeExchange = {
        protocol: handler.protocol,
        method,
        path,
        headers: req.headers,
        body,
        prompt,
        allText,
        at: Date.now(),
      };
      exchanges.push(exchange);
      const behaviour = choose(exchange);
      if (behaviour.kind === 'hang') {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      const delay = behaviour.kind === 'reply' ? (behaviour.delayMs ?? 0) : 0;
      const send = () => {
        if (!res.destroyed) handler.answer(res, body, behaviour);
      };
      const later = () => (delay > 0 ? setTimeout(send, delay).unref() : send());
      if (behaviour.kind === 'reply' && behaviour.until) void behaviour.until.then(later, later);
      else later();
    });
  });
  server.on('connection', (socket) => {
    if (!LOOPBACK.has(socket.remoteAddress ?? '')) {
      refusedConnections++;
      socket.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    exchanges,
    unmatched,
    get refusedConnections() {
      return refusedConnections;
    },
    script(next) {
      choose = next;
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
