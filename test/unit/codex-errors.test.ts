import { describe, expect, it } from 'vitest';
import { AppServerError } from '../../libs/adapters/codex/app-server-client.ts';
import { classifyCodexError, readErrorInfo, retryAfterOf } from '../../libs/adapters/codex/codex-errors.ts';
import { isClosing, isHeldElsewhere, isMissingThread } from '../../libs/adapters/codex/read-thread.ts';

/**
 * The classification of Codex turn errors, on payloads recorded from the real codex 0.171.0
 * (test/integration/codex-errors.test.ts runs the real CLI for each; these cover what a test
 * home with request_max_retries = 0 cannot show: the notices of Codex's own retries).
 */
describe('classifyCodexError', () => {
  it('keeps what the retry notices said that the final error does not, and skips Codex\'s "Reconnecting" lines', () => {
    // A 503 with request_max_retries = 1, as the daemon sent it.
    const final = {
      message: 'exceeded retry limit, last status: 503 Service Unavailable',
      codexErrorInfo: { responseTooManyFailedAttempts: { httpStatusCode: 503 } },
      additionalDetails: null,
    };
    const notices = [
      {
        error: {
          message: 'Reconnecting... 1/1',
          codexErrorInfo: { responseStreamDisconnected: { httpStatusCode: 503 } },
          additionalDetails: 'unexpected status 503 Service Unavailable: the pool is draining, url: http://127.0.0.1/v1/responses',
        },
        willRetry: true,
      },
      { error: final, willRetry: false },
    ];
    const c = classifyCodexError(final, notices);
    expect(c.failure).toEqual({ kind: 'transient', httpStatus: 503 });
    expect(c.error).toContain('exceeded retry limit, last status: 503 Service Unavailable');
    expect(c.error).toContain('(earlier: unexpected status 503 Service Unavailable: the pool is draining');
    expect(c.error).not.toContain('Reconnecting');
    expect(c.error).toContain('[transient, HTTP 503, responseTooManyFailedAttempts:');
  });

  it('takes the last notice when the turn carries no error of its own', () => {
    const c = classifyCodexError(null, [
      {
        error: { message: 'Quota exceeded. Check your plan and billing details.', codexErrorInfo: 'usageLimitExceeded' },
        willRetry: false,
      },
    ]);
    expect(c.failure).toEqual({ kind: 'limit' });
    expect(c.error).toMatch(/^Quota exceeded/);
  });

  it('a missing environment variable is configuration, and says where to set it', () => {
    const c = classifyCodexError({ message: 'Missing environment variable: `FAKE_OPENAI_KEY`.', codexErrorInfo: 'other' });
    expect(c.failure).toEqual({ kind: 'configuration' });
    expect(c.error).toContain("set FAKE_OPENAI_KEY in the agent's env setting");
  });

  it('a status the variant carries decides over its name (a 401 comes as httpConnectionFailed)', () => {
    expect(classifyCodexError({ message: 'x', codexErrorInfo: { httpConnectionFailed: { httpStatusCode: 401 } } }).failure).toEqual({
      kind: 'authentication',
      httpStatus: 401,
    });
    expect(classifyCodexError({ message: 'x', codexErrorInfo: { httpConnectionFailed: { httpStatusCode: 403 } } }).failure).toEqual({
      kind: 'authentication',
      httpStatus: 403,
    });
    expect(classifyCodexError({ message: 'x', codexErrorInfo: { httpConnectionFailed: { httpStatusCode: 404 } } }).failure).toEqual({
      kind: 'configuration',
      httpStatus: 404,
    });
    expect(classifyCodexError({ message: 'x', codexErrorInfo: { httpConnectionFailed: { httpStatusCode: 413 } } }).failure).toEqual({
      kind: 'limit',
      httpStatus: 413,
    });
    expect(classifyCodexError({ message: 'x', codexErrorInfo: { httpConnectionFailed: { httpStatusCode: 502 } } }).failure).toEqual({
      kind: 'transient',
      httpStatus: 502,
    });
    expect(classifyCodexError({ message: 'x', codexErrorInfo: { responseStreamDisconnected: { httpStatusCode: null } } }).failure).toEqual({
      kind: 'transient',
    });
  });

  it('maps each codexErrorInfo name to its kind; an unknown name is transient', () => {
    const kind = (info: unknown) => classifyCodexError({ message: 'm', codexErrorInfo: info }).failure.kind;
    expect(kind('unauthorized')).toBe('authentication');
    for (const info of ['contextWindowExceeded', 'usageLimitExceeded', 'sessionBudgetExceeded']) expect(kind(info)).toBe('limit');
    for (const info of ['cyberPolicy', 'bioPolicy', 'misalignmentPolicyViolation', 'inferenceHookDenied'])
      expect(kind(info)).toBe('refusal');
    for (const info of ['modelNotFound', 'badRequest']) expect(kind(info)).toBe('configuration');
    for (const info of [
      'rateLimitExceeded',
      'serverOverloaded',
      'internalServerError',
      'policyCapacityUnavailable',
      'other',
      'somethingNew',
      null,
    ])
      expect(kind(info)).toBe('transient');
    expect(
      classifyCodexError({ message: 'We’re currently experiencing high demand', codexErrorInfo: 'internalServerError' }).failure,
    ).toEqual({ kind: 'transient', httpStatus: 500 });
  });

  it('reads retry times the upstream message states, only for transient failures', () => {
    expect(retryAfterOf(['Please try again in 1.5s.'])).toBe(1_500);
    expect(retryAfterOf(['try again in 250ms'])).toBe(250);
    expect(retryAfterOf(['Please try again in 2 minutes'])).toBe(120_000);
    expect(retryAfterOf(['no time here'])).toBeUndefined();
    expect(
      classifyCodexError({ message: 'Quota exceeded. Please try again in 20s.', codexErrorInfo: 'usageLimitExceeded' }).failure,
    ).toEqual({ kind: 'limit' });
    expect(readErrorInfo({ httpConnectionFailed: { httpStatusCode: 429 } })).toEqual({ name: 'httpConnectionFailed', httpStatus: 429 });
  });
});

describe('thread/resume refusals that mean busy', () => {
  it('a thread the daemon is still unloading ("… is closing; retry thread/resume after the thread is closed") is busy, not a missing thread nor a writer elsewhere', () => {
    const closing = new AppServerError(
      'thread/resume',
      -32600,
      'thread 019a0000-0000-7000-8000-000000000000 is closing; retry thread/resume after the thread is closed',
    );
    expect(isClosing(closing)).toBe(true);
    expect(isMissingThread(closing)).toBe(false);
    expect(isHeldElsewhere(closing)).toBe(false);
    expect(isClosing(new AppServerError('thread/resume', -32600, 'thread not found'))).toBe(false);
    expect(isClosing(new Error('is closing'))).toBe(false);
  });
});
