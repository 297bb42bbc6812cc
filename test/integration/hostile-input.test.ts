import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOG, ERROR_CODES, isErrorCode } from '../../libs/domain/errors.ts';
import { LIMITS } from '../../libs/domain/limits.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * Hostile input at every write route of the API, as property tests: random and malformed
 * bodies, huge strings, wrong types, odd Unicode, garbage path ids and bad credentials. For
 * every generated call: no 5xx; a refusal is `{ error: { code, message } }` with a catalog
 * code; and a refused call leaves every table exactly as it was (no partial write). Agent text
 * is data: it is stored and returned as sent, byte for byte. No worker runs, so nothing but the
 * call under test writes to the database between the two snapshots (the audit row of an
 * accepted call is waited for before the next call).
 */

let baton: TestBaton;

/** Ids made in beforeAll, so path ids and references can be real as well as garbage. */
interface Fixtures {
  agents: string[];
  victims: string[];
  handoffs: string[];
  sessionId: string;
  facts: string[];
  claimToken: string;
  victimTokens: string[];
  tokens: Record<string, string>;
}
let fx: Fixtures;

// ---- what the database holds: one count + md5 per table, in one query

const ORDER: Record<string, string> = {
  workspaces: 'id',
  projects: 'id',
  agents: 'id',
  sessions: 'id',
  facts: 'id',
  handoffs: 'id',
  handoff_events: 'id',
  delivery_attempts: 'id',
  notifications: 'id',
  connections: 'id',
  settings: 'key',
  work_requests: 'handoff_id, action, claim_token',
  audit_events: 'id',
};
const fingerprint = (from: string, order: string) =>
  `(SELECT count(*) || ' ' || coalesce(md5(string_agg(x::text, ',' ORDER BY ${order})), '-') FROM ${from} x)`;
const SNAPSHOT_SQL = `SELECT ${[
  ...Object.entries(ORDER).map(([table, order]) => `${fingerprint(table, order)} AS ${table}`),
  // last_used_at is bookkeeping the auth hook writes (fire-and-forget) on any call, refused or not.
  `${fingerprint('(SELECT id, project_id, agent_id, name, secret_hash, is_admin, created_at, revoked_at FROM agent_tokens)', 'id')} AS agent_tokens`,
].join(', ')}`;

async function snapshot(): Promise<Record<string, string>> {
  const { rows } = await baton.db.pool.query<Record<string, string>>(SNAPSHOT_SQL);
  return rows[0]!;
}

// ---- values that print short in a counterexample but serialise to what they stand for

/** A long string: fast-check prints `"é".repeat(300000)`, the request carries the real thing. */
class Huge {
  constructor(
    readonly unit: string,
    readonly times: number,
  ) {}
  toJSON(): string {
    return this.unit.repeat(this.times);
  }
  [fc.toStringMethod](): string {
    return `${JSON.stringify(this.unit)}.repeat(${this.times})`;
  }
}
/** A number literal JSON.stringify cannot write (1e309, NaN, 30 digits): spliced into the text. */
class RawNumber {
  constructor(readonly text: string) {}
  toJSON(): string {
    return `__raw_number__:${this.text}`;
  }
  [fc.toStringMethod](): string {
    return this.text;
  }
}
/**
 * Objects or arrays nested `levels` deep around a string: spliced in as raw JSON text, because
 * JSON.stringify itself overflows the stack on the deepest of them.
 */
class Deep {
  constructor(
    readonly kind: 'object' | 'array',
    readonly levels: number,
    readonly leaf: string,
  ) {}
  text(): string {
    const [open, close] = this.kind === 'object' ? ['{"a":', '}'] : ['[', ']'];
    return `${open.repeat(this.levels)}${JSON.stringify(this.leaf)}${close.repeat(this.levels)}`;
  }
  toJSON(): string {
    return `__raw_json__:${Buffer.from(this.text()).toString('base64')}`;
  }
  [fc.toStringMethod](): string {
    return `deep(${JSON.stringify(this.kind)}, ${this.levels}, ${JSON.stringify(this.leaf)})`;
  }
}
const encode = (body: unknown): string =>
  JSON.stringify(body)
    .replace(/"__raw_number__:([^"]*)"/g, '$1')
    .replace(/"__raw_json__:([A-Za-z0-9+/=]*)"/g, (_, b64: string) => Buffer.from(b64, 'base64').toString());

// ---- generators

const NASTY = [
  '<script>alert(1)</script>',
  "'; DROP TABLE handoffs; --",
  '{{x}}',
  '${x}',
  '%s%n%x',
  '\u202eevil\u202c',
  '\u200f\u200e',
  '\ufeffbom',
  '😀👩‍👩‍👧‍👦🏳️‍🌈',
  'Z\u0351\u0307\u0324a\u0308l\u0300',
  '\r\n\t',
  '\u0001\u001f\u007f\u0085',
  '\u2028\u2029',
  'İıßﬃ',
  '../../etc/passwd',
  'null',
  'true',
  '0',
  '-1',
  'NaN',
  'Infinity',
  '1e309',
  ' ',
  '',
  '@project',
  'LEAD',
  'lead ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '00000000-0000-0000-0000-000000000000',
  '2026-06-30T23:59:60Z',
];
/** Dates a schema's `date-time` format may let through: leap seconds, year 0, day 30 of February. */
const DATE_EDGES = [
  '2026-06-30T23:59:60Z',
  '0000-01-01T00:00:00Z',
  '9999-12-31T23:59:59.999Z',
  '2026-02-30T00:00:00Z',
  '2026-13-01T00:00:00Z',
  '2026-01-01T00:00:00+14:00',
  '2026-01-01 00:00:00Z',
  '2026-01-01T00:00:00',
  '1970-01-01T00:00:00.000000001Z',
  '+275760-09-13T00:00:00Z',
];
/** Around every documented limit, and past the body limit. */
const LENGTHS = [
  0, 1, 64, 65, 100, 101, 120, 121, 200, 201, 1_000, 1_001, 2_000, 2_001, 4_000, 4_001, 8_000, 8_001, 32_000, 32_001, 100_000, 262_144,
  300_000,
];

const odd = fc.oneof(
  fc.constantFrom(...NASTY),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.array(fc.constantFrom(...NASTY, 'a', ' '), { minLength: 1, maxLength: 5 }).map((a) => a.join('')),
);
const huge = fc.tuple(fc.constantFrom('a', 'é', '😀', '\u202e', '\u0301'), fc.constantFrom(...LENGTHS)).map(([u, n]) => new Huge(u, n));
/** Nesting around the documented depth limit and far past it, with a NUL at the bottom now and then. */
const deep = fc
  .tuple(
    fc.constantFrom('object' as const, 'array' as const),
    fc.constantFrom(LIMITS.jsonDepth - 2, LIMITS.jsonDepth - 1, LIMITS.jsonDepth, LIMITS.jsonDepth + 1, 100, 10_000),
    fc.constantFrom('x', 'a\u0000b', '\ud800'),
  )
  .map(([kind, levels, leaf]) => new Deep(kind, levels, leaf));
/** Mostly a value the route accepts; now and then one at or past the edge of what it accepts. */
const edgy = <T, E>(valid: fc.Arbitrary<T>, edge: fc.Arbitrary<E>) =>
  fc.oneof({ weight: 5, arbitrary: valid }, { weight: 1, arbitrary: edge });
const text = fc.oneof(
  { weight: 5, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 24 }) },
  { weight: 3, arbitrary: odd },
  { weight: 1, arbitrary: huge },
);
const count = edgy(
  fc.integer({ min: 1, max: 600 }),
  fc.constantFrom(-1, 0, 86_400, 86_401, LIMITS.dueMinutesMax, LIMITS.dueMinutesMax + 1, 2 ** 31, 2 ** 53),
);
const isoDate = fc.oneof(
  fc
    .date({ min: new Date('1900-01-01T00:00:00Z'), max: new Date('2200-01-01T00:00:00Z'), noInvalidDate: true })
    .map((d) => d.toISOString()),
  fc.constantFrom(...DATE_EDGES),
);
/** A wrong value for any field: wrong type, huge, empty, odd Unicode, nested, unrepresentable numbers. */
const hostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, 1e308, Number.MAX_SAFE_INTEGER + 2, [], {}, [null], ''),
  fc.constantFrom('1e309', '-1e-400', '1.0', '123456789012345678901234567890', 'NaN').map((t) => new RawNumber(t)),
  odd,
  huge,
  fc.jsonValue({ maxDepth: 2, stringUnit: 'binary' }),
  deep,
  fc.array(odd, { maxLength: 25 }),
  fc.dictionary(odd, odd, { maxKeys: 4 }),
);
const handle = (real: string[]) =>
  fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...real) },
    { weight: 1, arbitrary: fc.constantFrom(...real).map((s) => s.toUpperCase()) },
    { weight: 1, arbitrary: fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,12}$/) },
    { weight: 1, arbitrary: fc.constantFrom('a'.repeat(64), 'a'.repeat(65), '-lead', 'lead!', 'lé', '@project', '', ' lead') },
  );
/** Only lone surrogates are replaced (the u flag keeps pairs whole): encodeURIComponent throws on them. */
const encodeSegment = (s: string) => encodeURIComponent(s.replace(/[\ud800-\udfff]/gu, '\ufffd'));
/** A path segment: real ids, their upper case, other UUIDs, odd text, very long ones, broken escapes. */
const segment = (real: string[]) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...real) },
    { weight: 1, arbitrary: fc.constantFrom(...real).map((s) => s.toUpperCase()) },
    { weight: 2, arbitrary: fc.uuid() },
    { weight: 2, arbitrary: odd.map(encodeSegment) },
    {
      weight: 1,
      arbitrary: fc.tuple(fc.constantFrom('a', 'é'), fc.constantFrom(99, 100, 101, 1_000, 10_000)).map(([u, n]) => new Huge(u, n)),
    },
    { weight: 1, arbitrary: fc.constantFrom('%', '%zz', '%E0%A4%A', '%00', '..', '%2F', 'a%2Fb', '%C0%AF') },
  );
type Segment = string | Huge;
const pathOf = (seg: Segment) => (typeof seg === 'string' ? seg : encodeSegment(seg.toJSON()));

/** Every write route, with a body it would plausibly accept. */
interface WriteRoute {
  name: string;
  method: 'POST' | 'PUT' | 'DELETE';
  url(seg: string): string;
  segment?(f: Fixtures): fc.Arbitrary<Segment>;
  valid(f: Fixtures): fc.Arbitrary<Record<string, unknown>>;
}
const rec = (model: Record<string, fc.Arbitrary<unknown>>, required: string[] = []) =>
  fc.record(model, { requiredKeys: required }) as fc.Arbitrary<Record<string, unknown>>;
/** `as` is required of an admin token (it names the agent), optional for an agent's own token. */
const actor = (f: Fixtures, more: Record<string, fc.Arbitrary<unknown>> = {}, required: string[] = []) =>
  rec({ as: handle(f.agents), ...more }, ['as', ...required]);
const claimToken = (f: Fixtures) => edgy(fc.constant(f.claimToken), fc.oneof(fc.uuid(), text));
const handoffAction = (action: string, valid: WriteRoute['valid']): WriteRoute => ({
  name: `POST /v1/handoffs/:id/${action}`,
  method: 'POST',
  url: (s) => `/v1/handoffs/${s}/${action}`,
  segment: (f) => segment(f.handoffs),
  valid,
});

const ROUTES: WriteRoute[] = [
  {
    name: 'POST /v1/agents',
    method: 'POST',
    url: () => '/v1/agents',
    valid: (f) =>
      rec(
        {
          id: edgy(fc.stringMatching(/^[a-z][a-z0-9_-]{0,20}$/), handle(f.agents)),
          provider: edgy(fc.constant('manual'), fc.constantFrom('demo', 'codex', 'webhook', 'MANUAL')),
          displayName: text,
          // Free-form JSON: now and then one plain key holding deep nesting, so nothing else refuses the body first.
          settings: fc.oneof(
            fc.dictionary(odd, hostile, { maxKeys: 3 }),
            fc.dictionary(fc.constantFrom('nested', 'thinkMs'), deep, { minKeys: 1, maxKeys: 1 }),
          ),
          target: fc.option(text, { nil: null }),
        },
        ['id', 'provider'],
      ),
  },
  {
    name: 'POST /v1/handoffs',
    method: 'POST',
    url: () => '/v1/handoffs',
    valid: (f) =>
      rec(
        {
          from: handle(f.agents),
          to: fc.oneof(handle(f.agents), fc.constant('@project')),
          message: text,
          title: fc.option(text, { nil: null }),
          focus: text,
          doneWhen: text,
          context: rec({ summary: text, openQuestions: fc.array(text, { maxLength: 3 }), nextSteps: fc.array(text, { maxLength: 3 }) }),
          dueAt: isoDate,
          dueMinutes: count,
          idempotencyKey: edgy(fc.constantFrom('key-1', 'key-2'), text),
          session: edgy(fc.constant(f.sessionId), fc.uuid()),
        },
        ['from', 'to', 'message'],
      ).map((b) => {
        // Both at once is a documented refusal; keep it for the mutations to find.
        if ('dueAt' in b && 'dueMinutes' in b) delete b['dueMinutes'];
        return b;
      }),
  },
  handoffAction('acknowledge', (f) => actor(f)),
  handoffAction('release', (f) => rec({ as: handle(f.agents), reason: text })),
  handoffAction('accept', (f) => actor(f, { leaseSeconds: count })),
  handoffAction('heartbeat', (f) => actor(f, { claimToken: claimToken(f), leaseSeconds: count }, ['claimToken'])),
  handoffAction('return', (f) =>
    actor(
      f,
      {
        claimToken: claimToken(f),
        revision: edgy(fc.nat(3), count),
        summary: text,
        outcome: fc.constantFrom('succeeded', 'failed'),
        facts: fc.array(edgy(fc.constantFrom(...f.facts), fc.oneof(fc.uuid(), text)), { maxLength: 4 }),
      },
      ['claimToken', 'summary'],
    ),
  ),
  handoffAction('close', (f) =>
    actor(f, { resolution: fc.constantFrom('accepted', 'revision', 'blocked'), note: text, revision: edgy(fc.nat(3), count) }, [
      'resolution',
    ]),
  ),
  handoffAction('cancel', (f) => actor(f)),
  {
    name: 'PUT /v1/settings/:key',
    method: 'PUT',
    url: (s) => `/v1/settings/${s}`,
    segment: () =>
      edgy(
        fc.constantFrom('enabled', 'enabledAfter', 'connections', 'outageGuard'),
        fc.oneof(fc.constantFrom('ENABLED', '__proto__', 'constructor', 'toString'), segment(['enabled'])),
      ),
    valid: () =>
      rec(
        {
          value: fc.oneof(
            fc.boolean(),
            fc.constant(null),
            isoDate,
            fc.constantFrom('open', 'restricted'),
            fc.dictionary(odd, rec({ statusUrl: edgy(fc.webUrl(), text), down: fc.boolean(), detail: text }), { maxKeys: 2 }),
          ),
        },
        ['value'],
      ),
  },
  {
    name: 'PUT /v1/connections',
    method: 'PUT',
    url: () => '/v1/connections',
    valid: (f) => rec({ from: handle(f.agents), to: handle(f.agents), rule: fc.constantFrom('allow', 'block') }, ['from', 'to', 'rule']),
  },
  {
    name: 'POST /v1/sessions',
    method: 'POST',
    url: () => '/v1/sessions',
    valid: (f) => actor(f, { title: text, summary: text }, ['title']),
  },
  {
    name: 'POST /v1/sessions/:id/facts',
    method: 'POST',
    url: (s) => `/v1/sessions/${s}/facts`,
    segment: (f) => segment([f.sessionId]),
    valid: (f) =>
      actor(
        f,
        {
          kind: fc.constantFrom('decision', 'failed_attempt', 'lesson', 'open_question', 'note', 'result'),
          text,
          supersedes: edgy(fc.constantFrom(...f.facts), fc.uuid()),
        },
        ['kind', 'text'],
      ),
  },
  {
    name: 'POST /v1/tokens',
    method: 'POST',
    url: () => '/v1/tokens',
    valid: (f) => rec({ agent: handle(f.agents), project: handle(['default', 'other']), admin: fc.boolean(), name: text }),
  },
  {
    name: 'POST /v1/projects',
    method: 'POST',
    url: () => '/v1/projects',
    valid: () => rec({ id: edgy(fc.stringMatching(/^[a-z][a-z0-9_-]{0,20}$/), handle(['default', 'other'])), name: text }, ['id']),
  },
  // The two deletions come last and aim at victims, so the fixtures the routes above use survive.
  {
    name: 'DELETE /v1/agents/:id',
    method: 'DELETE',
    url: (s) => `/v1/agents/${s}`,
    segment: (f) => segment(f.victims),
    valid: () => fc.constant({}),
  },
  {
    name: 'DELETE /v1/tokens/:id',
    method: 'DELETE',
    url: (s) => `/v1/tokens/${s}`,
    segment: (f) => segment(f.victimTokens),
    valid: () => fc.constant({}),
  },
];

const UNKNOWN_KEYS = ['extra', '__proto__', 'constructor', 'admin', 'id', 'tokenId', 'projectId', ''];
/** A valid-looking body with one of its fields set to a hostile value or removed, or an unknown field added. */
function mutate(valid: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<Record<string, unknown>> {
  return valid.chain((body) => {
    const own = Object.keys(body);
    const key =
      own.length > 0
        ? fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...own) }, { weight: 1, arbitrary: fc.constantFrom(...UNKNOWN_KEYS) })
        : fc.constantFrom(...UNKNOWN_KEYS);
    return fc.tuple(key, fc.option(hostile, { freq: 6, nil: undefined })).map(([k, v]) => {
      const out = { ...body };
      if (v === undefined) delete out[k];
      // defineProperty, so "__proto__" becomes a real key of the JSON rather than a prototype.
      else Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
      return out;
    });
  });
}

type Transport =
  { kind: 'json'; contentType: string } | { kind: 'raw'; contentType: string | undefined; payload: string } | { kind: 'none' };
const transport: fc.Arbitrary<Transport> = fc.oneof(
  { weight: 16, arbitrary: fc.constant({ kind: 'json', contentType: 'application/json' } as const) },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom(
        'application/json; charset=utf-8',
        'APPLICATION/JSON',
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/json; charset=latin1',
      )
      .map((contentType) => ({ kind: 'json', contentType }) as const),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('raw' as const),
      contentType: fc.constantFrom('application/json', undefined),
      payload: fc.oneof(
        fc.string({ unit: 'binary', maxLength: 40 }),
        fc.json({ maxDepth: 2 }),
        fc.constantFrom(
          '',
          '{',
          '{"a":',
          '\ufeff{}',
          '{"a":1}{"b":2}',
          '{"a":1,"a":2}',
          '{"__proto__":{"admin":true}}',
          '{"constructor":{"prototype":{"admin":true}}}',
          'NaN',
          '[1,]',
          '"\\u0000"',
          '"\\ud800"',
          `${'['.repeat(10_000)}${']'.repeat(10_000)}`,
          `${'{"a":'.repeat(LIMITS.jsonDepth)}"\\u0000"${'}'.repeat(LIMITS.jsonDepth)}`,
        ),
      ),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'none' } as const) },
);

/** Who calls: the admin, an agent, nobody, a revoked token, or a malformed Authorization header. */
const caller = fc.oneof(
  { weight: 6, arbitrary: fc.constant('admin') },
  { weight: 3, arbitrary: fc.constantFrom('agent:lead', 'agent:dev', 'agent:stranger') },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.constantFrom(
        'none',
        'agent:revoked',
        'header:Bearer',
        'header:Basic dXNlcjpwYXNz',
        `header:Bearer baton_${'A'.repeat(43)}`,
        'admin-with-suffix',
        'admin-as-token',
      ),
      fc.string({ unit: 'grapheme-ascii', maxLength: 60 }).map((s) => `header:${s}`),
    ),
  },
);
function authorization(label: string): string | undefined {
  if (label === 'none') return undefined;
  if (label === 'admin') return `Bearer ${baton.adminToken}`;
  if (label === 'admin-with-suffix') return `Bearer ${baton.adminToken} extra`;
  if (label === 'admin-as-token') return `Token ${baton.adminToken}`;
  if (label.startsWith('header:')) return label.slice('header:'.length);
  return `Bearer ${fx.tokens[label.replace('agent:', '')]}`;
}
const projectHeader = edgy(
  fc.constant(undefined),
  fc.constantFrom('default', 'DEFAULT', 'other', 'nope', '', 'a'.repeat(65), '@project', '../x'),
);

interface Call {
  caller: string;
  project: string | undefined;
  idempotencyKey?: string | undefined;
  segment: Segment;
  body: unknown;
  transport: Transport;
}
/** Sent on every route; only POST /v1/handoffs reads it (and must agree with the body's key). */
const idempotencyHeader = edgy(fc.constant(undefined), fc.constantFrom('key-1', 'key-2', '', 'k'.repeat(LIMITS.idempotencyKey + 1), ' '));

function callsTo(route: WriteRoute): fc.Arbitrary<Call> {
  const valid = route.valid(fx);
  const body = fc.oneof(
    { weight: 6, arbitrary: valid },
    { weight: 4, arbitrary: mutate(valid) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }) },
    { weight: 1, arbitrary: huge },
    { weight: 1, arbitrary: deep },
  );
  const segment = route.segment?.(fx) ?? fc.constant('');
  return fc.record({ caller, project: projectHeader, idempotencyKey: idempotencyHeader, segment, body, transport });
}

function send(method: WriteRoute['method'], url: string, call: Call): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = {};
  const auth = authorization(call.caller);
  if (auth !== undefined) headers['authorization'] = auth;
  if (call.project !== undefined) headers['x-baton-project'] = call.project;
  if (call.idempotencyKey !== undefined) headers['idempotency-key'] = call.idempotencyKey;
  const t = call.transport;
  let payload: string | undefined;
  if (t.kind === 'json') {
    payload = encode(call.body);
    headers['content-type'] = t.contentType;
  } else if (t.kind === 'raw') {
    payload = t.payload;
    if (t.contentType !== undefined) headers['content-type'] = t.contentType;
  }
  return baton.app.inject({ method, url, headers, ...(payload !== undefined ? { payload } : {}) });
}

/** A plain JSON call as the admin, for the focused properties. */
const jsonCall = (body: unknown): Call => ({
  caller: 'admin',
  project: undefined,
  segment: '',
  body,
  transport: { kind: 'json', contentType: 'application/json' },
});

const parse = (raw: string): unknown => {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
};

const rows = (fingerprintOf: string | undefined) => Number(fingerprintOf?.split(' ')[0]);

/**
 * Sends one call and holds it to the three promises below. An accepted change outside the
 * handoff log gets its audit row after the response (an onResponse hook): it is waited for here,
 * so it cannot land inside the next call's snapshots.
 */
async function expectSafeCall(method: WriteRoute['method'], url: string, call: Call): Promise<LightMyRequestResponse> {
  const before = await snapshot();
  const res = await send(method, url, call);
  await expectSafeOutcome(res, before);
  if (res.statusCode < 300 && !url.startsWith('/v1/handoffs')) {
    await eventually(async () => expect(rows((await snapshot())['audit_events'])).toBeGreaterThan(rows(before['audit_events'])), {
      what: `the audit row of ${method} ${url}`,
    });
  }
  return res;
}

/** The three promises every call keeps, whatever was sent. */
async function expectSafeOutcome(res: LightMyRequestResponse, before: Record<string, string>): Promise<void> {
  const shown = `${res.statusCode} ${res.body.slice(0, 300)}`;
  // 1. Hostile input is the caller's fault: never a 5xx (and never a 1xx/3xx either).
  expect(res.statusCode, shown).toBeGreaterThanOrEqual(200);
  expect(res.statusCode, shown).toBeLessThan(500);
  if (res.statusCode < 300) return; // accepted: the write is legitimate
  expect(res.statusCode, shown).toBeGreaterThanOrEqual(400);
  // 2. A refusal is a JSON error body whose code is in the catalog, with the catalog's status.
  expect(String(res.headers['content-type']), shown).toMatch(/^application\/json/);
  const body = parse(res.body) as { error?: { code?: unknown; message?: unknown } } | undefined;
  expect(body, shown).toMatchObject({ error: { code: expect.any(String), message: expect.any(String) } });
  const code = body!.error!.code;
  expect(ERROR_CODES, shown).toContain(code);
  if (isErrorCode(code)) expect(ERROR_CATALOG[code].status, shown).toBe(res.statusCode);
  // 3. A refused call wrote nothing: every table's count and content are as before.
  expect(await snapshot(), `a refused call (${shown}) changed the database`).toEqual(before);
}

beforeAll(async () => {
  baton = await startTestBaton();
  const ok = async (p: Promise<{ status: number; body: any }>) => {
    const res = await p;
    expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
    return res.body;
  };
  const agents = ['lead', 'dev', 'peer'];
  const victims = ['victim-1', 'victim-2', 'victim-3'];
  for (const id of [...agents, ...victims]) await ok(baton.post('/v1/agents', { id, provider: 'manual' }));
  // Another project with its own agent, so project scoping is exercised too.
  await ok(baton.post('/v1/projects', { id: 'other' }));
  await ok(baton.post('/v1/agents', { id: 'stranger', provider: 'manual' }, { 'x-baton-project': 'other' }));
  const tokens = {
    lead: await baton.tokenFor('lead'),
    dev: await baton.tokenFor('dev'),
    stranger: await baton.tokenFor('stranger', 'other'),
  };
  const victimTokens: string[] = [];
  for (let i = 0; i < 3; i++) victimTokens.push((await ok(baton.post('/v1/tokens', { agent: 'peer', name: `victim ${i}` }))).record.id);
  const revoked = await ok(baton.post('/v1/tokens', { agent: 'peer', name: 'revoked' }));
  expect((await baton.del(`/v1/tokens/${revoked.record.id}`)).status).toBe(204);
  const session = await ok(baton.post('/v1/sessions', { as: 'lead', title: 'fixture session' }));
  const facts = [
    (await ok(baton.post(`/v1/sessions/${session.id}/facts`, { as: 'dev', kind: 'result', text: 'found it' }))).id,
    (await ok(baton.post(`/v1/sessions/${session.id}/facts`, { as: 'lead', kind: 'decision', text: 'do it' }))).id,
  ];
  const handoff = (body: Record<string, unknown>) => ok(baton.post('/v1/handoffs', { from: 'lead', session: session.id, ...body }));
  const message = await handoff({ to: 'dev', message: 'a plain message' });
  const owned = await handoff({ to: 'dev', title: 'owned work', message: 'do it' });
  const unowned = await handoff({ to: '@project', title: 'unowned work', message: 'anyone' });
  const claimed = await handoff({ to: 'dev', title: 'claimed work', message: 'in progress' });
  const claim = await ok(baton.post(`/v1/handoffs/${claimed.id}/accept`, { as: 'dev' }));
  const returned = await handoff({ to: 'dev', title: 'returned work', message: 'done' });
  const c2 = await ok(baton.post(`/v1/handoffs/${returned.id}/accept`, { as: 'dev' }));
  await ok(baton.post(`/v1/handoffs/${returned.id}/return`, { as: 'dev', claimToken: c2.claim.token, summary: 'done' }));
  const back = await ok(baton.post('/v1/handoffs', { from: 'peer', to: 'lead', message: 'from peer' }));
  fx = {
    agents,
    victims,
    handoffs: [message.id, owned.id, unowned.id, claimed.id, returned.id, back.id],
    sessionId: session.id,
    facts,
    claimToken: claim.claim.token,
    victimTokens,
    tokens: { ...tokens, revoked: revoked.token },
  };
});

afterAll(async () => {
  await baton?.stop();
});

describe('agent text is data', () => {
  // Well-formed Unicode without NUL: everything Postgres text can hold.
  const storable = fc
    .oneof(
      // With the u flag a surrogate pair is one code point, so only lone halves match.
      fc.constantFrom(...NASTY.filter((s) => !/[\u0000\ud800-\udfff]/u.test(s))),
      fc.string({ unit: 'binary', maxLength: 60 }),
      fc.string({ unit: 'grapheme', maxLength: 20 }),
      fc.constantFrom('😀'.repeat(LIMITS.title), '\u0301'.repeat(LIMITS.title), 'é'.repeat(LIMITS.focus)),
    )
    .map((s) => s.replaceAll('\u0000', ''));
  const fits = (max: number) => storable.filter((s) => [...s].length <= max);

  // Protects: a title and message with markup, SQL, templates, controls, emoji and RTL marks come back exactly as sent.
  it('round-trips through POST /v1/handoffs and GET /v1/handoffs/:id byte for byte', async () => {
    const sent = fc.record({
      caller: fc.constantFrom('admin', 'agent:lead'),
      to: fc.constantFrom('dev', '@project'),
      title: fits(LIMITS.title),
      message: fits(LIMITS.message).filter((s) => s.length > 0),
      focus: fits(LIMITS.focus),
      doneWhen: fits(LIMITS.doneWhen),
      summary: fits(LIMITS.contextSummary),
      openQuestions: fc.array(fits(LIMITS.listItem), { maxLength: 3 }),
    });
    await fc.assert(
      fc.asyncProperty(sent, async (s) => {
        const body = {
          to: s.to,
          title: s.title,
          message: s.message,
          focus: s.focus,
          doneWhen: s.doneWhen,
          context: { summary: s.summary, openQuestions: s.openQuestions, nextSteps: [s.message.slice(0, 100)] },
        };
        const auth = authorization(s.caller)!;
        const created = await baton.post('/v1/handoffs', s.caller === 'admin' ? { ...body, from: 'lead' } : body, { authorization: auth });
        // Storable text is accepted as it is (nothing to strip, escape or refuse).
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        const got = (await baton.get(`/v1/handoffs/${created.body.id}`, { authorization: auth })).body;
        const asBytes = (v: unknown) => Buffer.from(JSON.stringify(v), 'utf8').toString('hex');
        // Byte for byte: compared as UTF-8, so a normalisation or a replaced character shows.
        expect(asBytes([got.title, got.message, got.focus, got.doneWhen, got.context])).toBe(
          asBytes([
            s.title,
            s.message,
            s.focus,
            s.doneWhen,
            { summary: s.summary, openQuestions: s.openQuestions, nextSteps: body.context.nextSteps },
          ]),
        );
      }),
      { numRuns: 40 },
    );
  }, 120_000);

  const fields = ['message', 'title', 'focus', 'doneWhen', 'summary', 'openQuestion', 'idempotencyKey'] as const;
  const withField = (field: (typeof fields)[number], value: string) => {
    const body: Record<string, unknown> = { from: 'lead', to: 'dev', message: 'm', title: 'work' };
    if (field === 'summary') body['context'] = { summary: value };
    else if (field === 'openQuestion') body['context'] = { openQuestions: [value] };
    else body[field] = value;
    return body;
  };

  // Protects: Postgres cannot store U+0000 in text; the API refuses it as bad input instead of failing with a 5xx.
  it('a NUL character in any text field is refused with a 4xx and writes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...fields), fits(40), fits(40), async (field, a, b) => {
        const res = await expectSafeCall('POST', '/v1/handoffs', jsonCall(withField(field, `${a}\u0000${b}`)));
        // Refused (the safe-call checks above say: with a catalogued 4xx, nothing written), never stored altered.
        expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
      }),
      { numRuns: 30 },
    );
  }, 120_000);

  // Protects: a lone surrogate has no UTF-8 form; it is refused, never silently replaced with U+FFFD.
  it('a lone surrogate is refused or kept, never replaced', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('message', 'title'),
        fits(20),
        fc.integer({ min: 0xd800, max: 0xdfff }),
        async (field, around, unit) => {
          const value = `${around}${String.fromCharCode(unit)}${around}`;
          const res = await expectSafeCall('POST', '/v1/handoffs', jsonCall(withField(field, value)));
          if (res.statusCode >= 300) return;
          const got = (await baton.get(`/v1/handoffs/${(parse(res.body) as { id: string }).id}`)).body;
          // Accepted, it must come back as sent (JSON.stringify shows the lone half as \udXXX).
          expect(JSON.stringify(got[field]), 'stored text differs from what was sent').toBe(JSON.stringify(value));
        },
      ),
      { numRuns: 20 },
    );
  }, 120_000);
});

describe('times at the edge of the date-time format', () => {
  // Protects: a time the JSON schema lets through (leap second, year 0, 30 February, offsets) is stored or refused, never a 5xx.
  it('an odd dueAt or enabledAfter is stored or refused with a catalogued 4xx, and a refusal writes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('dueAt' as const, 'enabledAfter' as const), isoDate, async (field, time) => {
        if (field === 'dueAt')
          await expectSafeCall('POST', '/v1/handoffs', jsonCall({ from: 'lead', to: 'dev', message: `due ${time}`, dueAt: time }));
        else await expectSafeCall('PUT', '/v1/settings/enabledAfter', jsonCall({ value: time }));
      }),
      // Every edge on both fields first, then random times.
      {
        numRuns: 40,
        examples: DATE_EDGES.flatMap((t) => [['dueAt', t] as ['dueAt', string], ['enabledAfter', t] as ['enabledAfter', string]]),
      },
    );
  }, 120_000);
});

describe('nesting depth', () => {
  /** A path id each route can take without touching the fixtures the sweep needs. */
  const urlOf = (route: WriteRoute): string => {
    if (route.name.startsWith('PUT /v1/settings')) return route.url('outageGuard');
    if (route.name.startsWith('POST /v1/sessions/:id')) return route.url(fx.sessionId);
    if (route.name.startsWith('DELETE /v1/agents')) return route.url('nobody');
    if (route.name.startsWith('DELETE /v1/tokens')) return route.url('00000000-0000-0000-0000-000000000000');
    return route.url(fx.handoffs[1]!);
  };

  // Protects: deep nesting is refused by a documented limit before any recursive code (schema,
  // text check, JSON.stringify, jsonb) sees it: a 400, never a stack overflow.
  it('a body nested 10,000 levels deep is refused with 400 too_deeply_nested on every write route, and writes nothing', async () => {
    for (const route of ROUTES) {
      for (const kind of ['object', 'array'] as const) {
        const res = await expectSafeCall(
          route.method,
          urlOf(route),
          jsonCall({ as: 'lead', settings: { s: new Deep(kind, 10_000, 'x') } }),
        );
        expect(res.statusCode, `${route.name} ${kind}: ${res.body}`).toBe(400);
        expect((parse(res.body) as { error: { code: string } }).error.code, route.name).toBe('too_deeply_nested');
      }
    }
  }, 60_000);

  /** The routes that store free-form JSON: `levels` objects deep inside the field, so the deepest is at level levels + 2 of the body. */
  const freeForm = [
    {
      name: 'POST /v1/agents settings',
      method: 'POST' as const,
      url: '/v1/agents',
      body: (d: Deep, n: number) => ({ id: `deep-${n}-${d.levels}`, provider: 'manual', settings: { s: d } }),
    },
    {
      name: 'PUT /v1/settings/outageGuard value',
      method: 'PUT' as const,
      url: '/v1/settings/outageGuard',
      body: (d: Deep) => ({ value: { demo: d } }),
    },
  ];

  // Protects: the text check covers every level the depth limit lets through (it used to stop at 64, and Postgres then refused the NUL with a 500).
  it('free-form JSON: a NUL at the deepest accepted level is invalid_text, one level deeper (or 100) is too_deeply_nested', async () => {
    let n = 0;
    for (const route of freeForm) {
      for (const [levels, code] of [
        [LIMITS.jsonDepth - 3, 'invalid_text'],
        [LIMITS.jsonDepth - 2, 'invalid_text'],
        [LIMITS.jsonDepth - 1, 'too_deeply_nested'],
        [100, 'too_deeply_nested'],
      ] as const) {
        for (const leaf of ['a\u0000b', 'x\udc00']) {
          const res = await expectSafeCall(route.method, route.url, jsonCall(route.body(new Deep('object', levels, leaf), ++n)));
          const shown = `${route.name}, deepest object at level ${levels + 2}: ${res.statusCode} ${res.body.slice(0, 200)}`;
          expect(res.statusCode, shown).toBe(400);
          expect((parse(res.body) as { error: { code: string } }).error.code, shown).toBe(code);
        }
      }
    }
  }, 60_000);

  // Protects: the limit is the documented one, not a smaller cutoff: a body exactly jsonDepth levels deep gets past it, to the route's own checks.
  it('a body nested exactly to the limit passes the depth check', async () => {
    for (const route of freeForm) {
      const res = await expectSafeCall(
        route.method,
        route.url,
        jsonCall(route.body(new Deep('object', LIMITS.jsonDepth - 2, 'bottom'), 0)),
      );
      const code = res.statusCode < 300 ? null : (parse(res.body) as { error: { code: string } }).error.code;
      expect(code, `${route.name}: ${res.body.slice(0, 200)}`).not.toBe('too_deeply_nested');
    }
  });
});

// Last: the sweep changes what it is allowed to (it may even remove an agent named in odd case,
// such as "LEAD"), so the focused properties above run on the fixtures as they were made.
describe('hostile input at every write route', () => {
  for (const route of ROUTES) {
    // Protects: no 5xx, catalogued error bodies, and no partial writes on this route.
    it(`${route.name}: never a 5xx, every refusal a catalogued error, no refused call writes anything`, async () => {
      await fc.assert(
        fc.asyncProperty(callsTo(route), async (call) => {
          await expectSafeCall(route.method, route.url(pathOf(call.segment)), call);
        }),
        { numRuns: 60 },
      );
    }, 120_000);
  }
});
