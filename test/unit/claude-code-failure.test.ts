import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { claudeErrorText, claudeFailure } from '../../libs/adapters/claude-code/claude-failure.ts';
import { readStreamEnd, streamErrorReport } from '../../libs/adapters/claude-code/stream-end.ts';
import { lastTurnState } from '../../libs/adapters/claude-code/transcript.ts';

/**
 * How the Claude Code adapter reads the end of claude's stream and of a session's transcript.
 * The lines are the real claude 2.1.197's (captured against the fake Anthropic server, trimmed
 * to the fields that matter); test/integration/claude-code-failures.test.ts and
 * claude-code-foreign-turn.test.ts run the real CLI.
 */

const j = (v: unknown) => JSON.stringify(v);
const synthetic = (text: string, error: string) =>
  j({ type: 'assistant', message: { model: '<synthetic>', role: 'assistant', content: [{ type: 'text', text }] }, error, session_id: 's' });
const result = (fields: Record<string, unknown>) =>
  j({ type: 'result', subtype: 'success', is_error: true, session_id: 's', terminal_reason: 'completed', ...fields });
const retry = (delay: number, status: number, error: string) =>
  j({ type: 'system', subtype: 'api_retry', attempt: 1, max_retries: 1, retry_delay_ms: delay, error_status: status, error });
const init = j({ type: 'system', subtype: 'init', session_id: 's' });

describe('the end of a claude stream', () => {
  it("reads the result, the synthetic error message's name and the last retry of the failed request", () => {
    const stream = [
      init,
      retry(3000, 429, 'rate_limit'),
      synthetic('API Error: Request rejected (429) · slow down', 'rate_limit'),
      result({ api_error_status: 429, result: 'API Error: Request rejected (429) · slow down' }),
      '',
    ].join('\n');
    const end = readStreamEnd(stream);
    expect(end).toMatchObject({ errorName: 'rate_limit', retryDelayMs: 3000, result: { api_error_status: 429 } });
    expect(claudeFailure(streamErrorReport(end!))).toEqual({ kind: 'transient', httpStatus: 429, retryAfterMs: 3000 });
    expect(claudeErrorText(streamErrorReport(end!))).toBe(
      'claude reported an error (API status 429, rate_limit): API Error: Request rejected (429) · slow down',
    );
  });

  it("does not take the retries of an earlier model request of the turn for the failed one's", () => {
    const earlier = j({
      type: 'assistant',
      message: { model: 'claude-opus-4-8', content: [{ type: 'tool_use', id: 't', name: 'Bash', input: {} }] },
    });
    const toolResult = j({ type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 't', content: 'ok' }] } });
    const stream = [
      init,
      retry(500, 500, 'server_error'),
      earlier,
      toolResult,
      synthetic('Invalid API key · Fix external API key', 'authentication_failed'),
      result({ api_error_status: 401, result: 'Invalid API key · Fix external API key' }),
    ].join('\n');
    const end = readStreamEnd(stream)!;
    expect(end.retryDelayMs).toBeUndefined();
    expect(claudeFailure(streamErrorReport(end))).toEqual({ kind: 'authentication', httpStatus: 401 });
  });

  it('skips a line cut by the bounded read and has no end without a result', () => {
    expect(readStreamEnd(`[first 10 bytes cut]\n"partial":1}\n${init}\n`)).toBeNull();
    expect(readStreamEnd(`cut}\n${result({ is_error: false, result: 'fine' })}`)?.result.result).toBe('fine');
  });
});

describe('the kind of a claude error', () => {
  const kind = (r: Parameters<typeof claudeFailure>[0]) => claudeFailure(r).kind;

  it("follows claude's own names for API errors", () => {
    expect(kind({ errorName: 'server_error', httpStatus: 529, text: 'API Error: 529 Overloaded' })).toBe('transient');
    expect(kind({ errorName: 'rate_limit', httpStatus: 429, text: '' })).toBe('transient');
    expect(kind({ errorName: 'unknown', httpStatus: 400, text: 'API Error: 400 messages: bad' })).toBe('transient');
    expect(kind({ errorName: 'authentication_failed', httpStatus: 403, text: 'Failed to authenticate. API Error: 403 forbidden' })).toBe(
      'authentication',
    );
    expect(kind({ errorName: 'model_not_found', httpStatus: 404, text: "There's an issue with the selected model" })).toBe('configuration');
    expect(kind({ errorName: 'billing_error', httpStatus: 400, text: 'Credit balance is too low' })).toBe('limit');
    // An invalid request is a limit when it is about size, else the setup.
    expect(
      kind({
        errorName: 'invalid_request',
        httpStatus: 400,
        text: 'Prompt is too long · the request is ~250000 tokens',
        terminalReason: 'prompt_too_long',
      }),
    ).toBe('limit');
    expect(
      kind({ errorName: 'invalid_request', httpStatus: 413, text: 'Request too large (max 32MB).', terminalReason: 'image_error' }),
    ).toBe('limit');
    expect(kind({ errorName: 'invalid_request', httpStatus: 400, text: 'Claude Opus is not available with the Claude Pro plan.' })).toBe(
      'configuration',
    );
  });

  it("falls back on the status, and on the result's subtype for errors that are not the API's", () => {
    expect(kind({ httpStatus: 401, text: '' })).toBe('authentication');
    expect(kind({ httpStatus: 404, text: '' })).toBe('configuration');
    expect(kind({ httpStatus: 400, text: 'prompt is too long' })).toBe('limit');
    expect(kind({ httpStatus: 503, text: '' })).toBe('transient');
    expect(kind({ text: 'something new' })).toBe('transient');
    expect(kind({ subtype: 'error_during_execution', text: 'No conversation found with session ID: 5b1…' })).toBe('configuration');
    expect(kind({ subtype: 'error_during_execution', text: 'spawn failed' })).toBe('transient');
    expect(kind({ subtype: 'error_max_turns', text: 'Reached maximum number of turns (3)' })).toBe('limit');
  });

  it('gives a retry time only to a transient failure', () => {
    expect(claudeFailure({ errorName: 'authentication_failed', httpStatus: 401, text: '', retryDelayMs: 500 })).toEqual({
      kind: 'authentication',
      httpStatus: 401,
    });
    expect(claudeFailure({ errorName: 'server_error', httpStatus: 500, text: '', retryDelayMs: 1200 })).toEqual({
      kind: 'transient',
      httpStatus: 500,
      retryAfterMs: 1200,
    });
  });
});

describe('where the newest turn of a transcript stands', () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-claude-transcript-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let n = 0;
  const state = (...lines: unknown[]) => {
    const path = join(dir, `${++n}.jsonl`);
    writeFileSync(path, lines.map((l) => (typeof l === 'string' ? l : j(l))).join('\n') + '\n');
    return lastTurnState(path, 1024 * 1024);
  };
  const prompt = (text: string) => ({ type: 'user', message: { role: 'user', content: text }, timestamp: '2026-12-01T22:12:45.865Z' });
  const queued = (text: string) => ({ type: 'queue-operation', operation: 'enqueue', content: text });
  const text = (t: string, extra: Record<string, unknown> = {}) => ({
    type: 'assistant',
    message: { role: 'assistant', content: [{ type: 'text', text: t }], stop_reason: 'end_turn' },
    ...extra,
  });
  const toolUse = {
    type: 'assistant',
    message: { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Bash', input: {} }], stop_reason: 'tool_use' },
  };
  const toolResult = {
    type: 'user',
    message: { role: 'user', content: [{ tool_use_id: 'toolu_1', type: 'tool_result', content: 'slept' }] },
    toolUseResult: {},
  };
  const attachment = { type: 'attachment', attachment: { type: 'skill_listing' } };
  const lastPrompt = { type: 'last-prompt', lastPrompt: 'x' };

  it('is unfinished after a prompt, a tool call or a tool result, and says whose prompt it was', async () => {
    expect(await state(queued('hello'), prompt('hello'), attachment)).toEqual({
      open: true,
      waiting: 'an unanswered prompt',
      requestId: null,
    });
    expect(await state(prompt('hello'), toolUse)).toEqual({ open: true, waiting: 'a tool call without its result', requestId: null });
    expect(await state(prompt('please\n\nbaton-request-id: req-1\n'), toolUse, toolResult)).toEqual({
      open: true,
      waiting: 'a tool result the model has not answered',
      requestId: 'req-1',
    });
  });

  it("is finished after an answer, an API error message, a person's interruption, or only a slash command since", async () => {
    expect(await state(prompt('hello'), text('hi'), lastPrompt)).toEqual({ open: false });
    expect(await state(prompt('hello'), text('API Error: 500 boom', { isApiErrorMessage: true, error: 'server_error' }))).toEqual({
      open: false,
    });
    expect(await state(prompt('hello'), toolUse, toolResult, prompt('[Request interrupted by user for tool use]'))).toEqual({
      open: false,
    });
    expect(
      await state(
        prompt('hello'),
        text('hi'),
        prompt('<command-name>/model</command-name>'),
        prompt('<local-command-stdout>Set model</local-command-stdout>'),
      ),
    ).toEqual({ open: false });
    expect(await state(prompt('hello'), text('hi'), { ...prompt('caveat'), isMeta: true })).toEqual({ open: false });
  });

  it('reads only the end of the file, skipping the line the read cut', async () => {
    const path = join(dir, 'long.jsonl');
    writeFileSync(path, [j(prompt('x'.repeat(5000))), j(text('answered')), j(prompt('the last one'))].join('\n') + '\n');
    expect(await lastTurnState(path, 200)).toEqual({ open: true, waiting: 'an unanswered prompt', requestId: null });
    expect(await lastTurnState(join(dir, 'missing.jsonl'), 200)).toBeNull();
  });
});
