/**
 * What kind of failure a turn's error was, as the runtime reported it. It decides whether a
 * resend can help (delivery-policy.ts):
 * - `transient`: a server error, an overload, a rate limit, a broken stream or connection: resent
 *   after a growing back-off, never sooner than `retryAfterMs`.
 * - `configuration`: the agent or its host is set up wrongly (a missing environment variable, an
 *   unknown model, a bad base URL): every resend would fail the same way until someone fixes it.
 * - `authentication`: the runtime's credentials were refused (an invalid or missing key, 401/403).
 * - `refusal`: the model or its provider refused the request (a policy block).
 * - `limit`: a limit a resend meets again (the context window, a usage or budget quota, the
 *   account's credit).
 * A failure with no kind is treated as transient.
 */
export type FailureKind = 'transient' | 'configuration' | 'authentication' | 'refusal' | 'limit';

export const FAILURE_KINDS: readonly FailureKind[] = ['transient', 'configuration', 'authentication', 'refusal', 'limit'];

export interface TurnFailure {
  readonly kind: FailureKind;
  /** The model API's HTTP status, when the runtime said it. */
  readonly httpStatus?: number;
  /** When the runtime said the request may be tried again (a 429's or an overload's retry time). */
  readonly retryAfterMs?: number;
}

/** What the reason of a turn that is not resent starts with: the kind in a user's words. */
export const FAILURE_HEADLINES: Readonly<Record<Exclude<FailureKind, 'transient'>, string>> = {
  configuration: 'not resent: the agent is not set up to run this turn (configuration)',
  authentication: "not resent: the runtime's credentials were refused (authentication)",
  refusal: 'not resent: the model refused the request (refusal)',
  limit: 'not resent: a limit the same request would meet again (limit)',
};
