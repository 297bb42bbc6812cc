import { usageOf, type TurnUsage } from '../../domain/turn-usage.ts';
import type { ClaudeErrorReport } from './claude-failure.ts';

/** The `result` event claude writes last on its stream-json output, on one line. */
export interface StreamResult {
  readonly is_error?: boolean;
  readonly subtype?: string;
  readonly result?: string;
  readonly session_id?: string;
  readonly num_turns?: number;
  readonly duration_ms?: number;
  readonly total_cost_usd?: number;
  readonly api_error_status?: number | null;
  readonly terminal_reason?: string;
  readonly errors?: unknown;
  /** The turn's tokens, summed by claude over its model requests (Anthropic's names). */
  readonly usage?: {
    readonly input_tokens?: unknown;
    readonly output_tokens?: unknown;
    readonly cache_read_input_tokens?: unknown;
    readonly cache_creation_input_tokens?: unknown;
  };
  /** Per model, what it used (claude 2.1: `inputTokens`, `costUSD`, ...): its keys name the models. */
  readonly modelUsage?: Readonly<Record<string, unknown>>;
}

/** How a claude stream ended: its result, and what the failed request's last events said. */
export interface StreamEnd {
  readonly result: StreamResult;
  /** The `error` of the synthetic assistant message right before the result (an API error's kind). */
  readonly errorName?: string;
  /** `retry_delay_ms` of the last `system/api_retry` event of the final model request. */
  readonly retryDelayMs?: number;
  /** The model the turn ran on: the last real assistant message's, else the `system/init` line's. */
  readonly model?: string;
}

interface StreamEvent extends StreamResult {
  readonly type?: string;
  readonly model?: string;
  readonly error?: unknown;
  readonly retry_delay_ms?: unknown;
  readonly message?: { readonly model?: string };
}

function parse(line: string): StreamEvent | null {
  if (!line.startsWith('{')) return null;
  try {
    return JSON.parse(line) as StreamEvent;
  } catch {
    // The cut at the front of a bounded read, or a line being written.
    return null;
  }
}

/**
 * Reads the end of a stream-json output backwards: the last `result`, then, before it, the
 * error name of the synthetic message claude writes for an API error and the last `api_retry`
 * of the same model request (a real assistant message or a tool result before it belongs to an
 * earlier request, whose retries say nothing about this failure). Null without a result.
 */
export function readStreamEnd(stream: string): StreamEnd | null {
  const lines = stream.split('\n');
  let i = lines.length - 1;
  let result: StreamResult | null = null;
  for (; i >= 0 && !result; i--) {
    const line = lines[i]?.trim() ?? '';
    if (!line.includes('"result"')) continue;
    const event = parse(line);
    if (event?.type === 'result') result = event;
  }
  if (!result) return null;
  let errorName: string | undefined;
  let retryDelayMs: number | undefined;
  let sawAssistant = false;
  for (; i >= 0; i--) {
    const event = parse(lines[i]?.trim() ?? '');
    if (!event) continue;
    if (event.type === 'system' && (event as { subtype?: string }).subtype === 'api_retry') {
      if (typeof event.retry_delay_ms === 'number') retryDelayMs = event.retry_delay_ms;
      break;
    }
    if (event.type === 'assistant') {
      const synthetic = event.message?.model === '<synthetic>';
      if (!sawAssistant && synthetic && typeof event.error === 'string') errorName = event.error;
      sawAssistant = true;
      if (!synthetic) break;
    }
    if (event.type === 'user' || event.type === 'result') break;
  }
  const model = modelOf(lines, result);
  return {
    result,
    ...(errorName ? { errorName } : {}),
    ...(retryDelayMs !== undefined ? { retryDelayMs } : {}),
    ...(model ? { model } : {}),
  };
}

/**
 * The model a stream's turn ran on: the newest assistant message that is not claude's synthetic
 * one, else the `system/init` line (the front of a bounded read may have cut it), else the one
 * model `modelUsage` names.
 */
function modelOf(lines: readonly string[], result: StreamResult): string | undefined {
  let init: string | undefined;
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]?.trim() ?? '';
    if (!line.includes('"model"')) continue;
    const event = parse(line);
    if (event?.type === 'assistant' && event.message?.model && event.message.model !== '<synthetic>') return event.message.model;
    if (event?.type === 'system' && (event as { subtype?: string }).subtype === 'init' && typeof event.model === 'string')
      init ??= event.model;
  }
  if (init) return init;
  const named = result.modelUsage ? Object.keys(result.modelUsage) : [];
  return named.length === 1 ? named[0] : undefined;
}

/** What a stream's result says the turn used: tokens as claude summed them, the cost as claude computed it, the model. */
export function streamUsage(end: StreamEnd): TurnUsage {
  const u = end.result.usage;
  return usageOf({
    model: end.model,
    inputTokens: u?.input_tokens,
    outputTokens: u?.output_tokens,
    cacheReadTokens: u?.cache_read_input_tokens,
    cacheWriteTokens: u?.cache_creation_input_tokens,
    costUsd: end.result.total_cost_usd,
  });
}

/** What a stream's failed result reports, for claudeFailure / claudeErrorText. */
export function streamErrorReport(end: StreamEnd): ClaudeErrorReport {
  const r = end.result;
  const text = r.result ?? (Array.isArray(r.errors) ? r.errors.join('; ') : '');
  return {
    text,
    ...(end.errorName ? { errorName: end.errorName } : {}),
    ...(typeof r.api_error_status === 'number' ? { httpStatus: r.api_error_status } : {}),
    ...(r.subtype ? { subtype: r.subtype } : {}),
    ...(r.terminal_reason ? { terminalReason: r.terminal_reason } : {}),
    ...(end.retryDelayMs !== undefined ? { retryDelayMs: end.retryDelayMs } : {}),
  };
}
