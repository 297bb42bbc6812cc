import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCodexAdapter } from '../../libs/adapters/codex/create-codex-adapter.ts';
import type { DeliveryTarget, ProviderAdapter, TurnFailure, TurnRequest } from '../../libs/adapters/provider-adapter.ts';
import { startCodexFixture, type CodexFixture } from '../support/codex-fixture.ts';
import type { FakeBehaviour } from '../support/fake-models/fake-model-server.ts';
import { turnRequest } from '../support/turn-request.ts';

/**
 * What the REAL codex 0.171.0 reports for each kind of model failure (the fake Responses server on
 * loopback answers the turn's model call so; the Codex home has request_max_retries = 0), and how
 * the adapter classifies it: the followed turn (`turn/completed` and its `error` notifications)
 * and a fresh adapter's observation of the stored turn (`thread/turns/list`) must agree.
 */

let fx: CodexFixture;
let adapter: ProviderAdapter;
let threadId: string;
const signal = () => AbortSignal.timeout(20_000);

const turn = (message: string): TurnRequest => turnRequest(message);

const target = (): DeliveryTarget => ({
  agentId: 'agent-errors',
  handle: 'eng',
  target: threadId,
  settings: { cwd: fx.cwd, codexHome: fx.codexHome, binary: fx.binary },
});

/** Runs one turn whose model call gets `behaviour`; returns its end as followed and as observed afresh. */
async function failWith(behaviour: FakeBehaviour): Promise<{ error: string; failure: TurnFailure | undefined }> {
  const req = turn(`a turn that meets ${JSON.stringify(behaviour)}`);
  fx.fake.script((x) => (x.prompt.includes(req.requestId) ? behaviour : { kind: 'reply', text: 'ok' }));
  expect(await adapter.sendTurn(target(), req, signal())).toEqual({ outcome: 'accepted' });
  const end = await adapter.waitForTurn(target(), req.requestId, { onRunning: async () => undefined }, signal());
  if (end.status !== 'failed') throw new Error(`expected a failed turn, got ${JSON.stringify(end)}`);
  const fresh = createCodexAdapter({ baseEnv: fx.env });
  try {
    const seen = await fresh.observeTurn(target(), req.requestId, signal());
    expect(seen, 'observation of the stored turn classifies it as following it did').toEqual({
      found: true,
      status: 'failed',
      error: end.error,
      failure: end.failure,
    });
  } finally {
    await fresh.close();
  }
  return { error: end.error, failure: end.failure };
}

beforeAll(async () => {
  fx = await startCodexFixture();
  adapter = createCodexAdapter({ baseEnv: fx.env, pollMs: 100 });
  threadId = await fx.execThread('a thread whose turns fail');
});

afterAll(async () => {
  await adapter?.close();
  await fx?.close();
});

describe('Codex turn failures against the real codex app-server, classified', () => {
  it('HTTP 500: transient, status 500; Codex shows its own "high demand" words and drops the API\'s message', async () => {
    const { error, failure } = await failWith({ kind: 'error', status: 500, message: 'upstream exploded: db timeout' });
    expect(failure).toEqual({ kind: 'transient', httpStatus: 500 });
    expect(error).toMatch(/high demand/);
    expect(error).toContain('HTTP 500');
    expect(error, 'Codex 0.171.0 does not pass the body of a 500 on').not.toContain('upstream exploded');
  }, 30_000);

  it("HTTP 503: transient with its status and the API's message", async () => {
    const { error, failure } = await failWith({ kind: 'error', status: 503, message: 'the pool is draining' });
    expect(failure).toEqual({ kind: 'transient', httpStatus: 503 });
    expect(error).toContain('503 Service Unavailable: the pool is draining');
  }, 30_000);

  it('HTTP 429, with or without Retry-After: transient, status 429, and no retry time (Codex reports none)', async () => {
    const plain = await failWith({ kind: 'error', status: 429, code: 'rate_limit_exceeded', message: 'Rate limit reached for gpt-5.5.' });
    expect(plain.failure).toEqual({ kind: 'transient', httpStatus: 429 });
    expect(plain.error).toContain('429 Too Many Requests');
    const timed = await failWith({
      kind: 'error',
      status: 429,
      code: 'rate_limit_exceeded',
      message: 'Rate limit reached.',
      headers: { 'retry-after': '12', 'retry-after-ms': '12000' },
    });
    expect(timed.failure, 'Codex keeps Retry-After to its own retries').toEqual({ kind: 'transient', httpStatus: 429 });
  }, 30_000);

  it('a rate limit in the stream (response.failed) whose message says when: transient with that retry time', async () => {
    const { error, failure } = await failWith({
      kind: 'stream_error',
      code: 'rate_limit_exceeded',
      message: 'Rate limit reached for gpt-5.5. Please try again in 1.5s.',
    });
    expect(failure).toEqual({ kind: 'transient', retryAfterMs: 1_500 });
    expect(error).toContain('try again in 1.5s');
  }, 30_000);

  it("HTTP 401: authentication, status 401, with the API's message", async () => {
    const { error, failure } = await failWith({
      kind: 'error',
      status: 401,
      code: 'invalid_api_key',
      message: 'Incorrect API key provided: sk-xx.',
    });
    expect(failure).toEqual({ kind: 'authentication', httpStatus: 401 });
    expect(error).toContain('401 Unauthorized: Incorrect API key provided');
  }, 30_000);

  it('HTTP 400 with a context-length code: limit (contextWindowExceeded)', async () => {
    const { error, failure } = await failWith({
      kind: 'error',
      status: 400,
      code: 'context_length_exceeded',
      message: "This model's maximum context length is 400000 tokens.",
    });
    expect(failure).toEqual({ kind: 'limit' });
    expect(error).toMatch(/context window/);
    expect(error).toContain('contextWindowExceeded');
  }, 30_000);

  it("HTTP 400 refusing the request: configuration, with the API's message (Codex passes the body on as its message)", async () => {
    const { error, failure } = await failWith({
      kind: 'error',
      status: 400,
      code: 'invalid_value',
      message: 'Unsupported parameter: reasoning.effort',
    });
    expect(failure).toEqual({ kind: 'configuration' });
    expect(error).toContain('the model API refused the request (invalid_request_error): Unsupported parameter: reasoning.effort');
  }, 30_000);

  it('HTTP 404 model_not_found: configuration (modelNotFound)', async () => {
    const { failure, error } = await failWith({
      kind: 'error',
      status: 404,
      code: 'model_not_found',
      message: 'The model gpt-5.5 does not exist or you do not have access to it.',
    });
    expect(failure).toEqual({ kind: 'configuration' });
    expect(error).toContain('does not exist');
  }, 30_000);

  it("a response.failed stream: transient, with the model's message", async () => {
    const { error, failure } = await failWith({ kind: 'stream_error', message: 'the model failed mid-stream' });
    expect(failure).toEqual({ kind: 'transient' });
    expect(error).toContain('stream disconnected before completion: the model failed mid-stream');
  }, 30_000);

  it('an exhausted quota in the stream: limit; a policy block: refusal', async () => {
    expect(
      (await failWith({ kind: 'stream_error', code: 'insufficient_quota', message: 'You exceeded your current quota.' })).failure,
    ).toEqual({ kind: 'limit' });
    const blocked = await failWith({ kind: 'stream_error', code: 'cyber_policy', message: 'blocked by cyber policy' });
    expect(blocked.failure).toEqual({ kind: 'refusal' });
    expect(blocked.error).toContain('blocked by cyber policy');
  }, 30_000);

  it('made no connection beyond loopback', () => {
    expect(fx.tripwire.attempts).toEqual([]);
    expect(fx.fake.refusedConnections).toBe(0);
  });
});
