import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClaudeCodeAdapter } from '../../libs/adapters/claude-code/create-claude-code-adapter.ts';
import { inheritedEnv } from '../../libs/adapters/command/create-command-adapter.ts';
import type { DeliveryTarget, TurnEnd, TurnRequest } from '../../libs/adapters/provider-adapter.ts';
import type { FakeBehaviour } from '../support/fake-models/fake-model-server.ts';
import { markerOf, startClaudeCodeFixture, type ClaudeCodeFixture } from '../support/claude-code-fixture.ts';

/**
 * A failed claude_code turn says what kind of failure it was (the engine resends only transient
 * ones, never sooner than their retry time), from what the REAL `claude` CLI reports for the
 * model API's errors (the fake Anthropic server answering with them): on its stream, and in the
 * session's transcript for a look without a run record.
 */

let fx: ClaudeCodeFixture;
const never = new AbortController().signal;
const followed = { onRunning: async () => undefined };

function turn(requestId: string): TurnRequest {
  return {
    requestId,
    handoffId: randomUUID(),
    attempt: 1,
    from: 'lead',
    title: null,
    message: 'do the thing',
    focus: null,
    doneWhen: null,
    context: { summary: null, openQuestions: [], nextSteps: [] },
    packet: '(no context)',
  };
}

/** One turn of a new agent whose model requests all get `error`; its end as the adapter followed it. */
async function failedTurn(
  handle: string,
  error: FakeBehaviour,
  env: Record<string, string> = {},
): Promise<{ end: TurnEnd; target: DeliveryTarget; requestId: string }> {
  fx.script(handle, () => error);
  const settings = fx.settings(handle);
  const target: DeliveryTarget = {
    agentId: randomUUID(),
    handle,
    target: handle,
    settings: { ...settings, env: { ...settings.env, ...env } },
  };
  const adapter = createClaudeCodeAdapter({ runDir: fx.runDir, baseEnv: inheritedEnv(process.env) });
  const requestId = `req-${handle}`;
  expect((await adapter.sendTurn(target, turn(requestId), never)).outcome).toBe('accepted');
  const end = await adapter.waitForTurn(target, requestId, followed, never);
  expect(
    fx
      .requestsOf(handle)
      .map(markerOf)
      .every((m) => m === requestId),
  ).toBe(true);
  return { end, target, requestId };
}

beforeAll(async () => {
  fx = await startClaudeCodeFixture('baton-claude-failures-');
});

afterAll(async () => {
  await fx?.close();
});

describe('what kind of failure a claude_code turn was, as the real claude reports it', () => {
  it("a 401 is an authentication failure (not resent), from the stream and from the transcript alike, with the status and claude's words", async () => {
    const { end, target, requestId } = await failedTurn('keyless', { kind: 'error', status: 401, message: 'invalid x-api-key' });
    expect(end).toMatchObject({ status: 'failed', failure: { kind: 'authentication', httpStatus: 401 } });
    expect(end.status === 'failed' && end.failure?.retryAfterMs).toBeFalsy();
    expect(end.status === 'failed' && end.error).toMatch(/API status 401, authentication_failed\): Invalid API key/);
    // Another host's records (none for this turn): the transcript's copy of claude's error message says the same.
    const elsewhere = createClaudeCodeAdapter({ runDir: join(fx.root, 'other-runs'), baseEnv: inheritedEnv(process.env) });
    expect(await elsewhere.observeTurn(target, requestId, never)).toMatchObject({
      found: true,
      status: 'failed',
      failure: { kind: 'authentication', httpStatus: 401 },
      error: expect.stringContaining('Invalid API key'),
    });
  }, 60_000);

  it("a 500 is transient (resent later), with its status and the server's message", async () => {
    const { end } = await failedTurn('flaky', { kind: 'error', status: 500, message: 'the model is overloaded' });
    expect(end).toMatchObject({ status: 'failed', failure: { kind: 'transient', httpStatus: 500 } });
    expect(end.status === 'failed' && end.error).toMatch(/API status 500, server_error\): API Error: 500 the model is overloaded/);
  }, 60_000);

  it('a 429 with retry-after that claude retried once itself is transient, resent no sooner than the server asked', async () => {
    const retryAfterS = 3;
    const { end } = await failedTurn(
      'throttled',
      { kind: 'error', status: 429, message: 'slow down', headers: { 'retry-after': String(retryAfterS) } },
      { CLAUDE_CODE_MAX_RETRIES: '1' },
    );
    // claude's own retry, then the turn's failure.
    expect(fx.requestsOf('throttled')).toHaveLength(2);
    expect(end).toMatchObject({ status: 'failed', failure: { kind: 'transient', httpStatus: 429 } });
    const retryAfterMs = end.status === 'failed' ? end.failure?.retryAfterMs : undefined;
    expect(retryAfterMs).toBeGreaterThanOrEqual(retryAfterS * 1000);
    expect(retryAfterMs).toBeLessThanOrEqual(retryAfterS * 1000 * 1.25);
    expect(end.status === 'failed' && end.error).toContain('slow down');
  }, 60_000);

  it('names the kinds claude names: an unknown model is configuration, a credit balance or a prompt too long is a limit, any other 400 is transient', async () => {
    const cases: Array<[string, FakeBehaviour, string]> = [
      ['nomodel', { kind: 'error', status: 404, message: 'model: claude-nope' }, 'configuration'],
      ['broke', { kind: 'error', status: 400, message: 'Your credit balance is too low to access the Anthropic API.' }, 'limit'],
      ['verbose', { kind: 'error', status: 400, message: 'prompt is too long: 250000 tokens > 200000 maximum' }, 'limit'],
      ['odd', { kind: 'error', status: 400, message: 'messages: something the server disliked' }, 'transient'],
    ];
    for (const [handle, error, kind] of cases) {
      const { end } = await failedTurn(handle, error);
      expect(end, handle).toMatchObject({ status: 'failed', failure: { kind, httpStatus: (error as { status: number }).status } });
    }
  }, 90_000);

  it('made no connection past loopback in any of these runs', () => {
    expect(fx.fake.exchanges.length).toBeGreaterThan(0);
    expect(fx.tripwire.attempts).toEqual([]);
  });
});
