/**
 * How the CLI and the MCP server reach Baton's data: HTTP to the API (they never write to
 * Postgres themselves).
 * Errors keep the API's stable code.
 */
import { INT_SETTINGS } from '../config/int-settings.ts';
import { API_CLIENT_DEFAULTS } from '../config/component-defaults.ts';

export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    /** From the answer's Retry-After (503, 429), in milliseconds. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** How a request that carries an idempotency key is retried (see postIdempotent). */
export interface RetryPolicy {
  /** Tries in all, the first included. */
  readonly attempts: number;
  /** Wait before the n-th retry: baseDelayMs x 2^(n-1), or the answer's Retry-After if longer, at most maxDelayMs. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

/** A send's retries (the CLI's `send`, the MCP `send` tool). */
export const SEND_RETRY: RetryPolicy = {
  attempts: API_CLIENT_DEFAULTS.sendAttempts,
  baseDelayMs: API_CLIENT_DEFAULTS.sendRetryFirstMs,
  maxDelayMs: API_CLIENT_DEFAULTS.sendRetryMaxMs,
};

/**
 * Whether a failed call may be repeated with the same idempotency key: the database was
 * unavailable (the commit may or may not have landed), or the answer never came (network).
 * The key makes the repeat return the first handoff if it was stored.
 */
export function retryableWithKey(err: unknown): boolean {
  if (err instanceof ApiUnreachable) return true;
  return err instanceof ApiError && err.status === 503 && err.code === 'database_unavailable';
}

export class ApiUnreachable extends Error {
  constructor(
    readonly url: string,
    cause: unknown,
  ) {
    super(
      cause instanceof ApiTimeout
        ? `Baton at ${url} gave no answer within ${cause.timeoutMs} ms (BATON_CLIENT_TIMEOUT_MS); the call may or may not have taken effect: check with \`baton status\` or \`baton show\``
        : `cannot reach Baton at ${url} (${(cause as Error)?.message ?? String(cause)}); start it with \`baton serve\` or set BATON_URL`,
      { cause },
    );
    this.name = 'ApiUnreachable';
  }
}

/** An API answer, read whole. */
interface Answer {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  readonly text: string;
}

async function fromResponse(res: Response): Promise<Answer> {
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** How long a call may take, by default (`BATON_CLIENT_TIMEOUT_MS`): past it, the answer counts as lost. */
export const DEFAULT_CLIENT_TIMEOUT_MS = INT_SETTINGS.BATON_CLIENT_TIMEOUT_MS.default;

/** A call that got no (complete) answer within its deadline: like any lost answer, it may have landed. */
export class ApiTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms (BATON_CLIENT_TIMEOUT_MS)`);
    this.name = 'ApiTimeout';
  }
}

/*
 * Plain requests go through node:http rather than fetch: the first fetch of a process loads
 * undici, most of what a one-shot CLI call would cost beyond Node's own start
 * (services/cli/README.md, "Start-up time"). Server-sent event streams (openStream) still use
 * fetch, for its web stream body.
 */
async function httpRequest(
  url: URL,
  init: { method: string; headers: Record<string, string>; body?: string },
  timeoutMs: number,
): Promise<Answer> {
  const { request } = url.protocol === 'https:' ? await import('node:https') : await import('node:http');
  return new Promise<Answer>((resolve, reject) => {
    // The whole call is bounded (a stalled API, a half-open socket, a proxy that drops the answer).
    const deadline = setTimeout(() => req.destroy(new ApiTimeout(timeoutMs)), timeoutMs);
    deadline.unref();
    const fail = (err: Error) => {
      clearTimeout(deadline);
      reject(err);
    };
    const req = request(url, { method: init.method, headers: init.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', fail);
      res.on('end', () => {
        clearTimeout(deadline);
        const headers = res.headers;
        resolve({
          status: res.statusCode ?? 0,
          headers: {
            get: (name) => {
              const v = headers[name.toLowerCase()];
              return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
            },
          },
          text: Buffer.concat(chunks).toString('utf8'),
        });
      });
    });
    req.on('error', fail);
    req.end(init.body);
  });
}

export class ApiClient {
  constructor(
    private readonly baseUrl: string,
    private readonly project: string | undefined,
    private readonly token?: string | undefined,
    /** Named in the hint when the API refuses a missing or bad token. */
    private readonly profilePath?: string | undefined,
    /**
     * How a request reaches the API: the network by default; the API's own `/mcp` passes one
     * that calls its routes in process (app.inject), so MCP tools have one client either way.
     */
    private readonly fetchImpl?: typeof fetch,
    /** Every call's deadline, and a stream's wait for its headers (`BATON_CLIENT_TIMEOUT_MS`). */
    readonly timeoutMs: number = DEFAULT_CLIENT_TIMEOUT_MS,
  ) {}

  /** Headers every request of this client carries (withHeaders). */
  private extraHeaders: Readonly<Record<string, string>> = {};

  /** The same client, every request of which also carries `headers` (e.g. `X-Baton-Agent`). */
  withHeaders(headers: Readonly<Record<string, string>>): ApiClient {
    const c = new ApiClient(this.baseUrl, this.project, this.token, this.profilePath, this.fetchImpl, this.timeoutMs);
    c.extraHeaders = { ...this.extraHeaders, ...headers };
    return c;
  }

  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: T }> {
    const url = new URL(path, this.baseUrl);
    const init = {
      method,
      headers: {
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...(this.project ? { 'x-baton-project': this.project } : {}),
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        ...this.extraHeaders,
        ...headers,
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    };
    let res: Answer;
    try {
      res = this.fetchImpl
        ? await fromResponse(await this.fetchImpl(url, { ...init, signal: AbortSignal.timeout(this.timeoutMs) }))
        : await httpRequest(url, init, this.timeoutMs);
    } catch (err) {
      throw new ApiUnreachable(this.baseUrl, (err as Error).cause ?? err);
    }
    const text = res.text;
    let parsed: unknown = null;
    if (text !== '') {
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new ApiError('invalid_response', `the API answered ${res.status} with something that is not JSON`, res.status);
      }
    }
    if (res.status >= 400) throw this.refusal(res, parsed);
    return { status: res.status, body: parsed as T };
  }

  private refusal(res: Pick<Answer, 'status' | 'headers'>, parsed: unknown): ApiError {
    const e = (parsed as { error?: { code?: string; message?: string } } | null)?.error;
    let message = e?.message ?? `HTTP ${res.status}`;
    if (res.status === 401) {
      message += this.token
        ? ' (the token in BATON_TOKEN or the profile was refused)'
        : ` (no token: set BATON_TOKEN, or write a profile at ${this.profilePath ?? 'BATON_PROFILE'} with \`baton init\` or \`baton token create --profile\`)`;
    }
    const retryAfter = Number(res.headers.get('retry-after'));
    return new ApiError(
      e?.code ?? 'http_error',
      message,
      res.status,
      Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined,
    );
  }

  /**
   * Opens a server-sent event stream (`GET /v1/events`): the response with its body unread, or
   * the API's refusal as an ApiError. `signal` aborts it; so does `timeoutMs` passing before
   * the headers arrive (ApiUnreachable). Its body has no deadline: followEvents watches it.
   */
  async openStream(path: string, headers: Record<string, string>, signal: AbortSignal): Promise<Response> {
    const url = new URL(path, this.baseUrl);
    let res: Response;
    const opening = new AbortController();
    const onAbort = () => opening.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const headersDue = setTimeout(() => opening.abort(new ApiTimeout(this.timeoutMs)), this.timeoutMs);
    try {
      if (signal.aborted) throw signal.reason;
      res = await (this.fetchImpl ?? fetch)(url, {
        headers: {
          accept: 'text/event-stream',
          ...(this.project ? { 'x-baton-project': this.project } : {}),
          ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
          ...this.extraHeaders,
          ...headers,
        },
        signal: opening.signal,
      });
    } catch (err) {
      signal.removeEventListener('abort', onAbort);
      if (signal.aborted) throw err;
      throw new ApiUnreachable(
        this.baseUrl,
        opening.signal.reason instanceof ApiTimeout ? opening.signal.reason : ((err as Error).cause ?? err),
      );
    } finally {
      clearTimeout(headersDue);
    }
    // The body follows the caller's signal from here (the opening one stays linked to it): pass
    // a signal that lives as long as this stream, so the link goes with it.
    if (res.status >= 400) {
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
      throw this.refusal(res, parsed);
    }
    return res;
  }

  get<T>(path: string) {
    return this.request<T>('GET', path).then((r) => r.body);
  }

  post<T>(path: string, body: unknown, headers?: Record<string, string>) {
    return this.request<T>('POST', path, body, headers);
  }

  /**
   * POST a body that carries an idempotency key, repeating it with the same key after a 503
   * `database_unavailable` or a network error, up to `policy.attempts` tries in all. The
   * server answers a repeat of a stored key with the first result (200), so at most one is kept.
   */
  async postIdempotent<T>(
    path: string,
    body: unknown,
    policy: RetryPolicy,
    onRetry: (err: Error, waitMs: number) => void = () => undefined,
  ) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.post<T>(path, body);
      } catch (err) {
        if (attempt >= policy.attempts || !retryableWithKey(err)) throw err;
        const backoff = policy.baseDelayMs * 2 ** (attempt - 1);
        const waitMs = Math.min(policy.maxDelayMs, Math.max(backoff, err instanceof ApiError ? (err.retryAfterMs ?? 0) : 0));
        onRetry(err as Error, waitMs);
        await new Promise((r) => setTimeout(r, waitMs));
      }
    }
  }

  delete(path: string) {
    return this.request<unknown>('DELETE', path).then(() => undefined);
  }
}
