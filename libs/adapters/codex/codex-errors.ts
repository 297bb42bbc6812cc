import type { FailureKind, TurnFailure } from '../provider-adapter.ts';

/**
 * A Codex turn's error as the app-server reports it (`TurnError`, @openai/codex 0.171.0): on
 * `turn/completed` (`turn.error`), in the stored turn of `thread/turns/list`, and in each `error`
 * notification. `codexErrorInfo` is a name (`"usageLimitExceeded"`) or a one-key object whose
 * value may carry the model API's status (`{ "httpConnectionFailed": { "httpStatusCode": 401 } }`).
 */
export interface CodexTurnError {
  readonly message?: string | null;
  readonly codexErrorInfo?: unknown;
  readonly additionalDetails?: string | null;
}

/** An `error` notification of a turn (`ErrorNotification`): `willRetry` ones come before Codex's own retries. */
export interface CodexErrorNotice {
  readonly error: CodexTurnError;
  readonly willRetry: boolean;
}

export interface ClassifiedCodexError {
  /** Codex's message, what the turn's notifications added, and the kind with what to do about it. */
  readonly error: string;
  readonly failure: TurnFailure;
}

interface InfoRule {
  readonly kind: FailureKind;
  /** What the failure means for the agent, said after the kind. */
  readonly why: string;
}

/**
 * Each `codexErrorInfo` Codex 0.171.0 knows, and the kind of failure it is. Measured against the
 * real CLI (fake model on loopback; libs/adapters/README.md, "The Codex provider", lists what each
 * model answer became). Anything not listed (a newer Codex's name) is transient.
 */
const INFO_RULES: Readonly<Record<string, InfoRule>> = {
  unauthorized: {
    kind: 'authentication',
    why: "the model API refused Codex's credentials: check the Codex home's login or the key the agent's env setting gives",
  },
  contextWindowExceeded: {
    kind: 'limit',
    why: "the thread no longer fits the model's context window: give the agent a new thread, or compact this one",
  },
  usageLimitExceeded: { kind: 'limit', why: "the account's usage quota is spent" },
  sessionBudgetExceeded: { kind: 'limit', why: "the session's budget is spent" },
  cyberPolicy: { kind: 'refusal', why: 'the model provider refused the request (cyber policy)' },
  bioPolicy: { kind: 'refusal', why: 'the model provider refused the request (bio policy)' },
  misalignmentPolicyViolation: { kind: 'refusal', why: 'the model provider refused the request (misalignment policy)' },
  inferenceHookDenied: { kind: 'refusal', why: 'a hook of the Codex home refused the model request' },
  tooManyDenials: { kind: 'refusal', why: "Codex's reviewer denied the turn's actions too many times" },
  // The provider's policy check had no capacity: nothing was refused, a later try may pass.
  policyCapacityUnavailable: { kind: 'transient', why: "the model provider's policy check had no capacity" },
  modelNotFound: {
    kind: 'configuration',
    why: "the model does not exist or the key has no access to it: check the agent's model setting or the Codex home's config",
  },
  // A malformed request is built from the thread and the agent's settings: a resend sends the
  // same request and meets the same answer.
  badRequest: {
    kind: 'configuration',
    why: "the model API refused the request as malformed: check the agent's model and the Codex home's provider settings",
  },
  sandboxError: { kind: 'configuration', why: 'Codex could not set up its sandbox on this host' },
  rateLimitExceeded: { kind: 'transient', why: 'the model API is rate-limiting this account' },
  serverOverloaded: { kind: 'transient', why: 'the model is at capacity' },
  flexUnavailable: { kind: 'transient', why: 'flex processing is unavailable' },
  internalServerError: {
    kind: 'transient',
    why: "the model API answered with a server error (Codex shows its own words in place of the API's message)",
  },
  httpConnectionFailed: { kind: 'transient', why: 'the request to the model API failed' },
  responseStreamConnectionFailed: { kind: 'transient', why: "the model API's stream could not be opened" },
  responseStreamDisconnected: { kind: 'transient', why: "the model API's stream broke off" },
  responseTooManyFailedAttempts: { kind: 'transient', why: 'Codex gave up after its own retries' },
  threadRollbackFailed: { kind: 'transient', why: 'Codex could not roll the thread back' },
  activeTurnNotSteerable: { kind: 'transient', why: 'the thread was in a turn that takes no input' },
  other: { kind: 'transient', why: 'Codex reported no more specific cause' },
};

/** What an HTTP status of the model API says, over the info's own rule (a 401 comes as httpConnectionFailed). */
function kindOfStatus(status: number): InfoRule | null {
  if (status === 401 || status === 403)
    return {
      kind: 'authentication',
      why: "the model API refused the credentials: check the key the agent's env setting gives, or the Codex home's login",
    };
  if (status === 413) return { kind: 'limit', why: 'the request is larger than the model API takes' };
  if ([400, 404, 405, 410, 415, 422].includes(status))
    return {
      kind: 'configuration',
      why: "the model API refused the request: check the Codex home's provider (base_url) and the agent's model",
    };
  return null;
}

const MISSING_ENV = /^Missing environment variable: `?([A-Za-z_][A-Za-z0-9_]*)`?/;
const RETRY_IN = /try again in (\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec(?:ond)?s?|m|min(?:ute)?s?)\b/i;
/** Codex's own retry announcements ("Reconnecting... 1/5") say nothing about the cause. */
const RECONNECTING = /^Reconnecting\.\.\./;

/** The info's name and the HTTP status it carries, if any. */
export function readErrorInfo(info: unknown): { name: string | null; httpStatus: number | null } {
  if (typeof info === 'string') return { name: info, httpStatus: null };
  if (info === null || typeof info !== 'object') return { name: null, httpStatus: null };
  const [name, value] = Object.entries(info as Record<string, unknown>)[0] ?? [];
  const status = value !== null && typeof value === 'object' ? (value as { httpStatusCode?: unknown }).httpStatusCode : undefined;
  return { name: name ?? null, httpStatus: typeof status === 'number' && Number.isInteger(status) ? status : null };
}

/** A retry time the upstream message states ("Please try again in 1.5s"); Codex reports none of its own. */
export function retryAfterOf(texts: readonly string[]): number | undefined {
  for (const text of texts) {
    const m = RETRY_IN.exec(text);
    if (!m) continue;
    const n = Number(m[1]);
    const unit = m[2]!.toLowerCase();
    const ms = unit.startsWith('ms') || unit.startsWith('milli') ? n : unit.startsWith('m') ? n * 60_000 : n * 1_000;
    if (Number.isFinite(ms) && ms > 0) return Math.min(Math.ceil(ms), 24 * 60 * 60_000);
  }
  return undefined;
}

/** A 400's raw body, which Codex passes on as the message (`{"error":{"type":"invalid_request_error",...}}`). */
function rawApiError(message: string): { type: string | null; message: string | null } | null {
  if (!message.startsWith('{')) return null;
  try {
    const body = JSON.parse(message) as { error?: { type?: unknown; message?: unknown } };
    if (!body.error || typeof body.error !== 'object') return null;
    return {
      type: typeof body.error.type === 'string' ? body.error.type : null,
      message: typeof body.error.message === 'string' ? body.error.message : null,
    };
  } catch {
    return null;
  }
}

/**
 * Classifies a failed Codex turn. `error` is the turn's own (`turn.error`); `notices` are the
 * turn's `error` notifications when this worker followed it (observation has only the stored
 * turn, and classifies the same way without them). The text keeps Codex's message (which carries
 * the model API's status line and message where Codex passes them on), adds what the retry
 * notices said that it does not, and ends with the kind, the HTTP status and what to do.
 */
export function classifyCodexError(
  error: CodexTurnError | null | undefined,
  notices: readonly CodexErrorNotice[] = [],
): ClassifiedCodexError {
  const last = notices.filter((n) => !n.willRetry).at(-1)?.error;
  const err = error ?? last ?? {};
  const message = (err.message ?? '').trim() || 'the Codex turn failed';
  const { name, httpStatus: carried } = readErrorInfo(err.codexErrorInfo ?? last?.codexErrorInfo ?? null);
  // Codex 0.171.0 names exactly a 500 internalServerError (502, 503, 504 come as
  // httpConnectionFailed with their status), and passes on neither its status nor its body.
  const httpStatus = carried ?? (name === 'internalServerError' ? 500 : null);
  const details: string[] = [];
  for (const text of [err.additionalDetails, ...notices.flatMap((n) => [n.error.message, n.error.additionalDetails])]) {
    const t = (text ?? '').trim();
    if (t && !RECONNECTING.test(t) && t !== message && !message.includes(t) && !details.includes(t)) details.push(t);
  }
  const missing = MISSING_ENV.exec(message);
  const raw = rawApiError(message);
  let rule: InfoRule;
  let shown = message;
  if (missing) {
    rule = {
      kind: 'configuration',
      why: `no request reached the model: set ${missing[1]} in the agent's env setting (the Codex home's provider reads its key from it)`,
    };
  } else if (raw && raw.type === 'invalid_request_error') {
    shown = `the model API refused the request (${raw.type}): ${raw.message ?? message}`;
    rule = {
      kind: 'configuration',
      why: "a resend sends the same request: check the agent's model and the Codex home's provider settings",
    };
  } else {
    rule = (httpStatus !== null ? kindOfStatus(httpStatus) : null) ??
      INFO_RULES[name ?? 'other'] ?? { kind: 'transient', why: `Codex reported ${JSON.stringify(name)}` };
  }
  const retryAfterMs = rule.kind === 'transient' ? retryAfterOf([message, ...details]) : undefined;
  const tags = [httpStatus !== null ? `HTTP ${httpStatus}` : null, name && name !== 'other' ? name : null].filter(
    (t): t is string => t !== null,
  );
  const text = `${shown}${details.length > 0 ? ` (earlier: ${details.join('; ')})` : ''} [${rule.kind}${tags.length > 0 ? `, ${tags.join(', ')}` : ''}: ${rule.why}]`;
  return {
    error: text,
    failure: { kind: rule.kind, ...(httpStatus !== null ? { httpStatus } : {}), ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) },
  };
}
