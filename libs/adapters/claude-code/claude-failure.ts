import type { FailureKind, TurnFailure } from '../provider-adapter.ts';

/**
 * What claude (2.1.197) reported about a turn that ended in an error, from its stream-json output
 * or from the session's transcript. Probed against the fake Anthropic server with
 * CLAUDE_CODE_MAX_RETRIES=0 and 1 (libs/adapters/README.md, "The Claude Code provider"):
 * an API error ends the stream with a synthetic assistant message (`model: "<synthetic>"`) whose
 * top-level `error` names the kind, then a `result` with `is_error: true`, `api_error_status`
 * and `terminal_reason`; the transcript's copy of that message has `error`, `isApiErrorMessage`
 * and `apiErrorStatus`.
 */
export interface ClaudeErrorReport {
  /**
   * claude's own name for the error: `server_error` (500, 529, timeouts), `rate_limit` (429),
   * `authentication_failed` (401, 403), `oauth_org_not_allowed`, `billing_error` ("credit
   * balance is too low"), `model_not_found` (404 on the model), `invalid_request` (a prompt or
   * request too long, a model the plan does not include), `max_output_tokens`, `unknown`.
   */
  readonly errorName?: string;
  /** The model API's HTTP status (`api_error_status` / `apiErrorStatus`). */
  readonly httpStatus?: number;
  /** The text claude reported (the result, or the synthetic message's text). */
  readonly text: string;
  /** The result's `subtype`: `success` (API errors too), `error_during_execution`, `error_max_turns`, ... */
  readonly subtype?: string;
  /** Why claude's loop ended: `completed`, `prompt_too_long`, `image_error`, `blocking_limit`, `model_error`, ... */
  readonly terminalReason?: string;
  /**
   * `retry_delay_ms` of the last `system/api_retry` event of the failed request: claude's wait
   * before its own last retry (the server's `retry-after` when it sent one).
   */
  readonly retryDelayMs?: number;
}

/** claude's own test for a request the model cannot take because of its size (the same words its status line uses). */
const TOO_LARGE = /\b(too long|too large|exceeds|token limit|prompt is too long|context (window|length))\b/i;
/** Loop ends that a resend of the same request meets again. */
const LIMIT_ENDS = new Set(['prompt_too_long', 'image_error', 'blocking_limit', 'max_turns']);

function kindOf(r: ClaudeErrorReport): FailureKind {
  if (r.subtype === 'error_max_turns' || r.subtype === 'error_max_budget_usd') return 'limit';
  // `--resume` of a session claude cannot find where it looks (its transcript under another
  // project key or cwd). The write checks the transcript first and answers `gone` when it is
  // missing, so this is a transcript Baton sees and claude does not: every resend would fail.
  if (r.subtype === 'error_during_execution') return /no conversation found/i.test(r.text) ? 'configuration' : 'transient';
  if (r.terminalReason && LIMIT_ENDS.has(r.terminalReason)) return 'limit';
  switch (r.errorName) {
    case 'authentication_failed':
    case 'oauth_org_not_allowed':
      return 'authentication';
    case 'billing_error':
      return 'limit';
    case 'model_not_found':
      return 'configuration';
    case 'invalid_request':
      // A request too large for the model is a limit; the rest of what claude calls an invalid
      // request (a model the plan does not include, an API key it refuses to use) is the setup.
      return TOO_LARGE.test(r.text) ? 'limit' : 'configuration';
    case 'server_error':
    case 'rate_limit':
    case 'overloaded':
    case 'max_output_tokens':
    case 'unknown':
    case 'unknown_error':
      return 'transient';
    case undefined:
    default:
      break;
  }
  // No name (another claude version, or an error before any request): the status decides.
  switch (r.httpStatus) {
    case 401:
    case 403:
      return 'authentication';
    case 402:
      return 'limit';
    case 404:
      return 'configuration';
    case 413:
      return 'limit';
    case 400:
      return TOO_LARGE.test(r.text) ? 'limit' : 'transient';
    case undefined:
    default:
      return 'transient';
  }
}

/**
 * The kind of a failed claude turn, with the model API's status and, for a transient one, the
 * earliest sensible resend (claude's own last retry delay). Unknown errors are transient: a
 * wrong "transient" costs a few resends within the attempt budget, a wrong "do not resend"
 * loses a handoff that would have gone through.
 */
export function claudeFailure(r: ClaudeErrorReport): TurnFailure {
  const kind = kindOf(r);
  return {
    kind,
    ...(typeof r.httpStatus === 'number' && r.httpStatus > 0 ? { httpStatus: r.httpStatus } : {}),
    ...(kind === 'transient' && typeof r.retryDelayMs === 'number' && r.retryDelayMs > 0 ? { retryAfterMs: r.retryDelayMs } : {}),
  };
}

/** The error text of a failed turn: claude's status and name for it, then its own words (which carry the model API's message). */
export function claudeErrorText(r: ClaudeErrorReport): string {
  const facts = [r.httpStatus ? `API status ${r.httpStatus}` : null, r.errorName ?? null].filter((f): f is string => f !== null);
  const head = `claude reported an error (${facts.length > 0 ? facts.join(', ') : (r.subtype ?? 'error')})`;
  return r.text ? `${head}: ${r.text}` : head;
}
