import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';

/**
 * One HTTP exchange with a webhook agent, told apart the way delivery needs it:
 * - `not_sent`: no connection was ever made (refused, unresolvable, unreachable, the deadline
 *   passed while connecting; for https, the TLS handshake did not finish): not a byte of the
 *   request left, so it is safe to try again.
 * - `lost`: the connection was made, then failed (reset, closed, deadline, abort) before a whole
 *   answer came back: the request may have been read and acted on.
 * - `response`: a status line and a (bounded) body.
 * Redirects are never followed (node:http has no such behaviour); a fresh connection per
 * request (no keep-alive pool), so a reset can never be a stale pooled socket's.
 */
export type HttpExchange =
  | { readonly kind: 'response'; readonly status: number; readonly headers: IncomingHttpHeaders; readonly body: string }
  | { readonly kind: 'not_sent'; readonly error: string }
  | { readonly kind: 'lost'; readonly error: string };

export interface HttpRequestOptions {
  readonly method: 'GET' | 'POST';
  readonly url: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
  /** Bytes of the answer kept; the rest is not read. */
  readonly maxBodyBytes: number;
}

export function httpExchange(opts: HttpRequestOptions): Promise<HttpExchange> {
  return new Promise<HttpExchange>((resolve) => {
    let connected = false;
    let settled = false;
    let req: http.ClientRequest | undefined;
    const settle = (result: HttpExchange) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal.removeEventListener('abort', onAbort);
      resolve(result);
    };
    const fail = (why: string) => {
      settle(
        connected
          ? { kind: 'lost', error: `${why} after the request was sent` }
          : { kind: 'not_sent', error: `${why} before a connection was made` },
      );
      req?.destroy();
    };
    const onAbort = () => fail(opts.signal.reason instanceof Error ? `aborted (${opts.signal.reason.message})` : 'aborted');
    const timer = setTimeout(() => fail(`no answer within ${opts.timeoutMs} ms`), opts.timeoutMs);
    if (opts.signal.aborted) {
      clearTimeout(timer);
      resolve({ kind: 'not_sent', error: 'aborted before a connection was made' });
      return;
    }
    opts.signal.addEventListener('abort', onAbort, { once: true });

    const client = opts.url.protocol === 'https:' ? https : http;
    const headers: Record<string, string | number> = { ...opts.headers };
    if (opts.body !== undefined) headers['content-length'] = Buffer.byteLength(opts.body);
    req = client.request(opts.url, { method: opts.method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        if (size >= opts.maxBodyBytes) return;
        chunks.push(chunk);
        size += chunk.length;
      });
      res.on('end', () => {
        settle({
          kind: 'response',
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).subarray(0, opts.maxBodyBytes).toString('utf8'),
        });
        req?.destroy();
      });
      res.on('close', () => {
        if (!res.complete) fail('the answer broke off');
      });
      res.on('error', (err) => fail(`the answer failed (${err.message})`));
    });
    // Until the connection (and, for https, the TLS session) is up, Node only buffers the
    // request: nothing has left, whatever happens next.
    req.on('socket', (socket: Socket) => {
      const up = () => {
        connected = true;
      };
      if (opts.url.protocol === 'https:') socket.once('secureConnect', up);
      else if (socket.connecting) socket.once('connect', up);
      else up();
    });
    req.on('error', (err: NodeJS.ErrnoException) => fail(err.code ? `${err.code}: ${err.message}` : err.message));
    req.end(opts.body);
  });
}

/**
 * `Retry-After` (seconds, or an HTTP date) in milliseconds from now; undefined when absent or
 * unreadable. Capped at a day: a hostile or broken value must not park a handoff for years.
 */
export function retryAfterMs(value: string | string[] | undefined, nowMs: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  const trimmed = text.trim();
  const ms = /^\d+$/.test(trimmed) ? Number(trimmed) * 1000 : Date.parse(trimmed) - nowMs;
  if (!Number.isFinite(ms)) return undefined;
  return Math.min(Math.max(0, ms), 86_400_000);
}
