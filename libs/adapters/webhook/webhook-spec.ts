import { Type } from 'typebox';
import { REDACTED, type ProviderSpec } from '../provider-spec.ts';

/** Headers Baton sets itself on every request to a webhook agent; settings may not override them. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-type',
  'content-length',
  'transfer-encoding',
  'connection',
  'idempotency-key',
  'baton-timestamp',
  'baton-signature',
]);

const HttpUrl = (description: string) => Type.String({ minLength: 1, maxLength: 2_000, description });

/** The agent settings of a webhook agent, as the adapter reads them (validated by WEBHOOK_SPEC first). */
export interface WebhookSettings {
  readonly url: string;
  readonly secret: string;
  readonly statusUrl?: string;
  readonly busyUrl?: string;
  readonly callbackUrl?: string;
  readonly timeoutMs?: number;
  readonly headers?: Readonly<Record<string, string>>;
}

/** Where the request id goes in a `statusUrl` template. */
export const REQUEST_ID_PLACEHOLDER = '{requestId}';

function httpUrlProblem(key: string, value: unknown): string | null {
  if (typeof value !== 'string') return null;
  let url: URL;
  try {
    url = new URL(value.replaceAll(REQUEST_ID_PLACEHOLDER, 'request-id'));
  } catch {
    return `/${key}: must be an absolute http or https URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `/${key}: must be an http or https URL`;
  // Credentials in a URL would be shown by every read: the secret is the only secret.
  if (url.username || url.password) return `/${key}: must not carry a user name or password`;
  return null;
}

export const WEBHOOK_SPEC: ProviderSpec = {
  provider: 'webhook',
  push: true,
  summary: 'an HTTP endpoint: each turn is a signed POST; the result comes in the answer, a signed callback, or a status URL',
  settingsSchema: Type.Object(
    {
      url: HttpUrl('where each turn is POSTed (http or https)'),
      secret: Type.String({
        minLength: 16,
        maxLength: 512,
        description: 'HMAC-SHA256 key of every request and callback (secret: never shown)',
      }),
      statusUrl: Type.Optional(HttpUrl('GET per request id; must contain {requestId}')),
      busyUrl: Type.Optional(HttpUrl('GET answering {"busy": true|false}; without it busy is only learnt from the write')),
      callbackUrl: Type.Optional(HttpUrl('where the agent calls back, when Baton is reached by another address than its own')),
      timeoutMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000, description: 'deadline of each request (default 30000)' })),
      headers: Type.Optional(
        Type.Record(
          Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$" }),
          Type.String({ maxLength: 1_000, pattern: '^[^\\r\\n]*$' }),
          {
            additionalProperties: false,
            description: 'extra headers (not secret: shown by reads)',
          },
        ),
      ),
    },
    { additionalProperties: false },
  ),
  check(settings) {
    const problems: string[] = [];
    for (const key of ['url', 'statusUrl', 'busyUrl', 'callbackUrl']) {
      const problem = httpUrlProblem(key, settings[key]);
      if (problem) problems.push(problem);
    }
    const statusUrl = settings['statusUrl'];
    if (typeof statusUrl === 'string' && !statusUrl.includes(REQUEST_ID_PLACEHOLDER)) {
      problems.push(`/statusUrl: must contain ${REQUEST_ID_PLACEHOLDER}, where the request id goes`);
    }
    const headers = settings['headers'];
    if (headers && typeof headers === 'object') {
      for (const name of Object.keys(headers)) {
        if (RESERVED_HEADERS.has(name.toLowerCase())) problems.push(`/headers/${name}: Baton sets this header itself`);
      }
    }
    return problems;
  },
  redact: (settings) => ('secret' in settings ? { ...settings, secret: REDACTED } : { ...settings }),
  deadlines: { writeMs: 30_000, observeMs: 15_000, busyMs: 10_000 },
};
