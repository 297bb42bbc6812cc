/**
 * The CLI's only way to Baton's data: HTTP to the API (it never writes to Postgres itself).
 * Errors keep the API's stable code.
 */
export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export class ApiUnreachable extends Error {
  constructor(readonly url: string, cause: unknown) {
    super(`cannot reach Baton at ${url} (${(cause as Error)?.message ?? String(cause)}); start it with \`baton serve\` or set BATON_URL`, { cause });
    this.name = 'ApiUnreachable';
  }
}

export class ApiClient {
  constructor(
    private readonly baseUrl: string,
    private readonly project: string | undefined,
    private readonly token?: string | undefined,
    /** Named in the hint when the API refuses a missing or bad token. */
    private readonly profilePath?: string | undefined,
  ) {}

  async request<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: T }> {
    const url = new URL(path, this.baseUrl);
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: {
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...(this.project ? { 'x-baton-project': this.project } : {}),
          ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (err) {
      throw new ApiUnreachable(this.baseUrl, (err as Error).cause ?? err);
    }
    const text = await res.text();
    let parsed: unknown = null;
    if (text !== '') {
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new ApiError('invalid_response', `the API answered ${res.status} with something that is not JSON`, res.status);
      }
    }
    if (res.status >= 400) {
      const e = (parsed as { error?: { code?: string; message?: string } } | null)?.error;
      let message = e?.message ?? `HTTP ${res.status}`;
      if (res.status === 401) {
        message += this.token
          ? ' (the token in BATON_TOKEN or the profile was refused)'
          : ` (no token: set BATON_TOKEN, or write a profile at ${this.profilePath ?? 'BATON_PROFILE'} with \`baton init\` or \`baton token create --profile\`)`;
      }
      throw new ApiError(e?.code ?? 'http_error', message, res.status);
    }
    return { status: res.status, body: parsed as T };
  }

  get<T>(path: string) {
    return this.request<T>('GET', path).then((r) => r.body);
  }

  post<T>(path: string, body: unknown, headers?: Record<string, string>) {
    return this.request<T>('POST', path, body, headers);
  }

  delete(path: string) {
    return this.request<unknown>('DELETE', path).then(() => undefined);
  }
}
