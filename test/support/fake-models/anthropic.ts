import type { ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { FakeBehaviour, ProtocolHandler } from './fake-model-server.ts';

/**
 * The Anthropic Messages API as the real `claude` CLI speaks it (recipe 1.3/1.4 in
 * ../../../shared/recipes/real-agent-clis.md): `POST /v1/messages` (the CLI adds `?beta=true`;
 * the core server matches the path only), answered as an SSE stream of the six events when the
 * request asks to stream, else as one Message JSON (the CLI's non-streaming fallback after a
 * failed stream).
 */

interface Block {
  readonly type?: string;
  readonly text?: string;
  readonly content?: unknown;
}
interface Message {
  readonly role?: string;
  readonly content?: string | readonly Block[];
}

function textsOf(content: unknown): string[] {
  if (typeof content === 'string') return [content];
  if (!Array.isArray(content)) return [];
  const out: string[] = [];
  for (const block of content as Block[]) {
    if (typeof block?.text === 'string') out.push(block.text);
    // A tool result carries its text one level down.
    else if (block?.type === 'tool_result') out.push(...textsOf(block.content));
  }
  return out;
}

function messagesOf(body: unknown): Message[] {
  const messages = (body as { messages?: unknown } | null)?.messages;
  return Array.isArray(messages) ? (messages as Message[]) : [];
}

const MODEL = 'claude-fake-1';

function message(text: string, model: string) {
  return {
    id: `msg_${randomBytes(8).toString('hex')}`,
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: Math.max(1, Math.ceil(text.length / 4)) },
  };
}

/** The error type the Anthropic API gives each status (its documented error shapes). */
function errorTypeOf(status: number): string {
  switch (status) {
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

function sse(res: ServerResponse, event: string, data: unknown): void {
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

export const anthropicProtocol: ProtocolHandler = {
  protocol: 'anthropic',

  // The CLI makes no count_tokens call (recipe 1.3); anything else is the core's 404.
  matches: (method, path) => method === 'POST' && path === '/v1/messages',

  promptOf(body) {
    const messages = messagesOf(body);
    // The CLI puts mid-conversation `role: "system"` entries (often last): the prompt is the
    // last user message, not the last message.
    const lastUser = [...messages].reverse().find((m) => m.role === 'user');
    const prompt = lastUser
      ? textsOf(lastUser.content)
          .filter((t) => !t.startsWith('<system-reminder>'))
          .join('\n')
      : '';
    const allText = messages.flatMap((m) => textsOf(m.content)).join('\n');
    return { prompt, allText };
  },

  answer(res, body, behaviour: Exclude<FakeBehaviour, { kind: 'hang' }>) {
    const model = typeof (body as { model?: unknown } | null)?.model === 'string' ? (body as { model: string }).model : MODEL;
    if (behaviour.kind === 'error') {
      res
        .writeHead(behaviour.status, {
          'content-type': 'application/json',
          'request-id': `req_fake_${randomBytes(4).toString('hex')}`,
          ...behaviour.headers,
        })
        .end(
          JSON.stringify({
            type: 'error',
            error: {
              type: behaviour.errorType ?? errorTypeOf(behaviour.status),
              message: behaviour.message ?? `fake model error ${behaviour.status}`,
            },
          }),
        );
      return;
    }
    const streaming = (body as { stream?: unknown } | null)?.stream === true;
    if (behaviour.kind === 'stream_error') {
      const error = { type: 'error', error: { type: 'api_error', message: behaviour.message ?? 'fake stream failure' } };
      if (!streaming) {
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify(error));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const m = message('', model);
      sse(res, 'message_start', { type: 'message_start', message: { ...m, content: [], stop_reason: null } });
      sse(res, 'error', error);
      res.end();
      return;
    }
    if (behaviour.kind === 'tool_use') {
      const id = `toolu_${randomBytes(8).toString('hex')}`;
      const call = {
        ...message('', model),
        content: [{ type: 'tool_use', id, name: behaviour.name, input: behaviour.input }],
        stop_reason: 'tool_use',
      };
      if (!streaming) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(call));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      sse(res, 'message_start', { type: 'message_start', message: { ...call, content: [], stop_reason: null } });
      sse(res, 'content_block_start', {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'tool_use', id, name: behaviour.name, input: {} },
      });
      sse(res, 'content_block_delta', {
        type: 'content_block_delta',
        index: 0,
        delta: { type: 'input_json_delta', partial_json: JSON.stringify(behaviour.input) },
      });
      sse(res, 'content_block_stop', { type: 'content_block_stop', index: 0 });
      sse(res, 'message_delta', {
        type: 'message_delta',
        delta: { stop_reason: 'tool_use', stop_sequence: null },
        usage: { output_tokens: 20 },
      });
      sse(res, 'message_stop', { type: 'message_stop' });
      res.end();
      return;
    }
    const base = message(behaviour.text, model);
    const u = behaviour.usage;
    const m = u
      ? {
          ...base,
          usage: {
            input_tokens: u.input,
            output_tokens: u.output,
            cache_read_input_tokens: u.cacheRead ?? 0,
            cache_creation_input_tokens: u.cacheWrite ?? 0,
          },
        }
      : base;
    if (!streaming) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(m));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    sse(res, 'message_start', {
      type: 'message_start',
      message: { ...m, content: [], stop_reason: null, usage: { ...m.usage, output_tokens: 1 } },
    });
    sse(res, 'content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
    sse(res, 'content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: behaviour.text } });
    sse(res, 'content_block_stop', { type: 'content_block_stop', index: 0 });
    sse(res, 'message_delta', {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: m.usage.output_tokens },
    });
    sse(res, 'message_stop', { type: 'message_stop' });
    res.end();
  },
};
