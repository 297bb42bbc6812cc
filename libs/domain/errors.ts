/**
 * The error catalog: every error Baton shows a caller has a stable code, an HTTP status and
 * whether retrying the same call can help. docs/ERRORS.md lists the same codes; a unit test
 * holds the two together. Match on `code`, never on `instanceof`, across process boundaries.
 */
export const ERROR_CATALOG = {
  invalid_text: {
    status: 400,
    retryable: false,
    summary: 'A string holds a NUL character or an unpaired UTF-16 surrogate, which cannot be stored as sent.',
  },
  validation_failed: { status: 400, retryable: false, summary: 'The request does not match the schema of the route.' },
  invalid_json: { status: 400, retryable: false, summary: 'The request body is not valid JSON.' },
  field_too_long: { status: 400, retryable: false, summary: 'A string or list is longer than its documented limit.' },
  too_deeply_nested: {
    status: 400,
    retryable: false,
    summary: 'The request body nests objects and arrays deeper than its documented limit (`jsonDepth`).',
  },
  invalid_cursor: { status: 400, retryable: false, summary: 'The pagination cursor was not issued by Baton.' },
  unsupported_media_type: { status: 415, retryable: false, summary: 'The body is not application/json.' },
  body_too_large: { status: 413, retryable: false, summary: 'The request body is larger than the byte limit.' },
  headers_too_large: {
    status: 431,
    retryable: false,
    summary: 'The request line (with its URL) and headers together are larger than the server accepts (16 KiB by default).',
  },
  malformed_request: { status: 400, retryable: false, summary: 'The request is not well-formed HTTP/1.1; the connection is closed.' },
  request_timeout: {
    status: 408,
    retryable: true,
    summary: 'The request line and headers did not arrive in time; the connection is closed.',
  },
  route_not_found: { status: 404, retryable: false, summary: 'No route matches the method and path.' },
  method_not_allowed: {
    status: 405,
    retryable: false,
    summary: 'The path exists but not for this method (`/mcp` takes POST only: Baton serves MCP without sessions or server-sent streams).',
  },
  project_not_found: { status: 404, retryable: false, summary: 'The project named by the request does not exist.' },
  agent_not_found: { status: 404, retryable: false, summary: 'No active agent with that id in the project.' },
  handoff_not_found: { status: 404, retryable: false, summary: 'No handoff with that id is visible to the caller.' },
  unknown_sender: { status: 422, retryable: false, summary: 'The sender is not an active agent of the project.' },
  unknown_recipient: { status: 422, retryable: false, summary: 'The recipient is not an active agent of the project.' },
  no_agent_with_role: {
    status: 422,
    retryable: false,
    summary: 'A handoff was sent to a role (`@role:<name>`) that no active agent of the project declares (its sender aside).',
  },
  unknown_provider: { status: 422, retryable: false, summary: 'Baton has no adapter for that provider (yet).' },
  invalid_settings: {
    status: 400,
    retryable: false,
    summary: "The agent's provider settings hold an unknown key or an ill-typed value (the message names the path).",
  },
  invalid_agent_card: {
    status: 400,
    retryable: false,
    summary:
      "The agent's A2A card (`description`, `skills`) holds an ill-typed or too long value, or a skill id twice (the message names the path).",
  },
  invalid_role: {
    status: 400,
    retryable: false,
    summary:
      "An agent's `roles` entry is not a role name (letters, digits, `-`, `_`, at most 32 characters), or it names more roles than `agentRoles` allows.",
  },
  idempotency_conflict: { status: 409, retryable: false, summary: 'The idempotency key was already used for a different handoff.' },
  not_recipient: { status: 403, retryable: false, summary: 'Only the recipient of the handoff may do this.' },
  not_sender: { status: 403, retryable: false, summary: 'Only the sender of the handoff may do this.' },
  not_a_message: { status: 409, retryable: false, summary: 'Work (a handoff with a title) is returned, not acknowledged.' },
  unknown_setting: { status: 400, retryable: false, summary: 'No runtime setting has that key.' },
  session_not_found: { status: 404, retryable: false, summary: 'No tracked session with that id in the project.' },
  fact_not_found: { status: 404, retryable: false, summary: 'No fact with that id in the session.' },
  subscription_not_found: { status: 404, retryable: false, summary: 'No event subscription with that id is visible to the caller.' },
  subscription_url_refused: {
    status: 422,
    retryable: false,
    summary: 'The subscription URL is not http(s), carries credentials, or names an address BATON_SUBSCRIPTION_ADDRESSES refuses.',
  },
  not_work: { status: 409, retryable: false, summary: 'The handoff is a plain message: it has no work to claim, return or close.' },
  handoff_held: {
    status: 409,
    retryable: true,
    summary: 'The handoff is HELD (its connection is blocked); it can be claimed once the hold lifts.',
  },
  already_claimed: { status: 409, retryable: false, summary: 'Someone else holds (or returned) the claim on this work.' },
  claim_lost: {
    status: 409,
    retryable: false,
    summary: 'This claim is no longer current (its lease ran out, or it was returned); nothing changed.',
  },
  replay_conflict: { status: 409, retryable: false, summary: 'The same request was already made with a different body.' },
  invalid_evidence: {
    status: 422,
    retryable: false,
    summary: 'A cited fact is not from the handed-off session, its project, or the returning agent.',
  },
  not_visible: { status: 403, retryable: false, summary: 'The agent may not act on this handoff.' },
  unauthenticated: { status: 401, retryable: false, summary: 'No valid Authorization: Bearer token was given.' },
  invalid_token: { status: 401, retryable: false, summary: 'The token is unknown, revoked, or its agent was removed.' },
  invalid_signature: {
    status: 401,
    retryable: false,
    summary:
      "A webhook callback's Baton-Signature is missing or is not the HMAC of its timestamp and body with the recipient agent's secret.",
  },
  stale_timestamp: {
    status: 401,
    retryable: false,
    summary: "A webhook callback's Baton-Timestamp is more than 5 minutes from Baton's clock; sign it again with the current time.",
  },
  turn_not_found: { status: 404, retryable: false, summary: 'No turn of a webhook agent has that request id.' },
  forbidden: {
    status: 403,
    retryable: false,
    summary: "The token does not allow this (an admin token is needed, or it is another agent's).",
  },
  csrf_failed: {
    status: 403,
    retryable: false,
    summary:
      "A browser-session request that changes something came without the session's CSRF token (`X-CSRF-Token`) or from another origin.",
  },
  host_not_allowed: {
    status: 403,
    retryable: false,
    summary:
      "The request's Host is not one of the API's allowed hosts (`BATON_ALLOWED_HOSTS`); browser pages, sign-in and cookie sessions answer only there.",
  },
  identity_mismatch: { status: 403, retryable: false, summary: 'The request names another agent than the one the token belongs to.' },
  rate_limited: { status: 429, retryable: true, summary: 'Too many requests from this token; wait for Retry-After seconds.' },
  token_not_found: { status: 404, retryable: false, summary: 'No token with that id.' },
  project_exists: { status: 409, retryable: false, summary: 'A project with that id already exists.' },
  too_many_facts: { status: 409, retryable: false, summary: 'The session already holds as many facts as it may (see docs/API.md).' },
  agent_exists: { status: 409, retryable: false, summary: 'An active agent with that id already exists in the project.' },
  invalid_transition: { status: 409, retryable: false, summary: 'The handoff is not in a state that allows this move.' },
  transition_not_permitted: { status: 403, retryable: false, summary: 'The caller may not cause this move.' },
  stale_revision: { status: 409, retryable: true, summary: 'The handoff changed since the caller read it; read it again.' },
  database_unavailable: {
    status: 503,
    retryable: true,
    summary:
      'Postgres did not answer in time. A read changed nothing; a write may or may not have been recorded (its commit can ' +
      'land after this answer): retry a send with the same Idempotency-Key, or read before acting again.',
  },
  events_unavailable: {
    status: 503,
    retryable: true,
    summary:
      'This API process serves no event stream (it was built without one, e.g. an embedded app); nothing was done. ' +
      'Retry against a process started by `baton api` or `baton serve`.',
  },
  shutting_down: {
    status: 503,
    retryable: true,
    summary:
      'This API process is shutting down and takes no new requests; nothing was done. Retry (another process, or this one once restarted, answers).',
  },
  task_not_continuable: {
    status: 409,
    retryable: false,
    summary:
      'A message continuing an A2A task (`taskId`) is taken only while the task is `input-required` (its work returned, ' +
      'waiting for the sender); a finished task is never restarted: send a new message.',
  },
  protocol_version_unsupported: {
    status: 400,
    retryable: false,
    summary:
      'The A2A gateway speaks protocol 1.0 (`A2A-Version: 1.0`) and 0.3 (no header, 0.3 method names): ' +
      "the header names another version, or the method is the other version's.",
  },
  protocol_method_unsupported: {
    status: 400,
    retryable: false,
    summary: 'The A2A gateway does not serve this method (the extended card; docs/API.md, "A2A").',
  },
  push_config_not_found: {
    status: 404,
    retryable: false,
    summary: 'The A2A task has no push-notification config with that id that the caller registered (or may see).',
  },
  too_many_push_configs: {
    status: 409,
    retryable: false,
    summary: 'The A2A task has LIMITS.pushConfigsPerTask push-notification configs already: delete one first.',
  },
  invalid_budget: {
    status: 400,
    retryable: false,
    summary: 'A budget sets neither `tokensPerDay` nor `usdPerDay`, or one out of range (whole tokens 1 to 10^12, USD above 0 up to 10^6).',
  },
  budget_not_found: { status: 404, retryable: false, summary: 'The project, or the agent named, has no budget to clear.' },
  internal_error: { status: 500, retryable: false, summary: 'An unexpected error; details are in the server log only.' },
} as const satisfies Record<string, { status: number; retryable: boolean; summary: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

export const ERROR_CODES = Object.keys(ERROR_CATALOG) as ErrorCode[];

/** A failure the caller can act on. `details` must never hold secrets or internal traces. */
export class BatonError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BatonError';
    this.code = code;
    this.status = ERROR_CATALOG[code].status;
    this.retryable = ERROR_CATALOG[code].retryable;
    this.details = details;
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CATALOG, value);
}

/** True when `err` carries the given stable code (works for errors rebuilt from JSON too). */
export function hasErrorCode(err: unknown, code: ErrorCode): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}

/** Closes a switch over a union: a new member becomes a compile error here. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
