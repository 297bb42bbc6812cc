import type { ServerResponse } from 'node:http';
import type { FakeBehaviour, FakeUsage, ProtocolHandler } from './fake-model-server.ts';

/**
 * The OpenAI Responses API as the real `codex` CLI (0.171.0) speaks it: `POST <base_url>/responses`
 * with `stream: true`, answered by server-sent events (../../../../shared/recipes/real-agent-clis.md,
 * 2.3 and 2.4). Codex keeps only what `response.output_item.done` carries (deltas alone are
 * dropped) and fails a turn whose stream ends without `response.completed`, so a reply sends the
 * full item, then `response.completed`. A `stream_error` is `response.failed`, which Codex
 * reports as the turn's error. An `error` is the status with `{ error: { type, code, message } }`
 * and the behaviour's headers (Codex reads the code of some: `context_length_exceeded`,
 * `insufficient_quota`, `model_not_found`). The item id becomes the app-server's `agentMessage.id`, so every
 * reply gets a fresh one.
 */

let sequence = 0;
const nextId = (prefix: string) => `${prefix}_fake${Date.now().toString(36)}${(++sequence).toString(36)}`;

interface InputItem {
  readonly type?: string;
  readonly role?: string;
  readonly content?: ReadonlyArray<{ readonly type?: string; readonly text?: string }> | string;
  readonly output?: unknown;
}

function textOf(item: InputItem): string {
  if (typeof item.content === 'string') return item.content;
  if (Array.isArray(item.content)) return item.content.map((c) => (typeof c.text === 'string' ? c.text : '')).join('\n');
  if (typeof item.output === 'string') return item.output;
  return '';
}

function sse(res: ServerResponse, type: string, data: Record<string, unknown>): void {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

export const responsesProtocol: ProtocolHandler = {
  protocol: 'responses',
  matches: (method, path) => method === 'POST' && /\/responses$/.test(path),
  promptOf(body) {
    const input = ((body as { input?: unknown } | null)?.input ?? []) as readonly InputItem[];
    const items = Array.isArray(input) ? input : [];
    // The first user message is Codex's <environment_context>; the prompt is the LAST user message.
    const users = items.filter((i) => i.type === 'message' && i.role === 'user');
    return { prompt: users.length > 0 ? textOf(users[users.length - 1]) : '', allText: items.map(textOf).join('\n') };
  },
  answer(res: ServerResponse, body: unknown, behaviour: Exclude<FakeBehaviour, { kind: 'hang' }>) {
    const model = String((body as { model?: unknown } | null)?.model ?? 'fake');
    if (behaviour.kind === 'error') {
      const type = behaviour.errorType ?? (behaviour.status >= 500 ? 'server_error' : 'invalid_request_error');
      res.writeHead(behaviour.status, { 'content-type': 'application/json', ...behaviour.headers }).end(
        JSON.stringify({
          error: { type, code: behaviour.code ?? 'fake_error', message: behaviour.message ?? `fake model error ${behaviour.status}` },
        }),
      );
      return;
    }
    const responseId = nextId('resp');
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    sse(res, 'response.created', { response: { id: responseId, object: 'response', status: 'in_progress', model, output: [] } });
    if (behaviour.kind === 'stream_error') {
      const message = behaviour.message ?? 'the fake model failed';
      sse(res, 'response.failed', {
        response: {
          id: responseId,
          object: 'response',
          status: 'failed',
          model,
          output: [],
          error: { code: behaviour.code ?? 'server_error', message },
        },
      });
      res.end();
      return;
    }
    // A tool call is one function_call item (recipe 2.4); MCP tools would need the tool_search
    // round trip first (2.5), which no test asks of this fake yet.
    const item =
      behaviour.kind === 'tool_use'
        ? {
            type: 'function_call',
            id: nextId('fc'),
            call_id: nextId('call'),
            name: behaviour.name,
            arguments: JSON.stringify(behaviour.input),
            status: 'completed',
          }
        : {
            type: 'message',
            id: nextId('msg'),
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text: behaviour.text, annotations: [] }],
          };
    const text = behaviour.kind === 'tool_use' ? '' : behaviour.text;
    sse(res, 'response.output_item.added', {
      output_index: 0,
      item: { ...item, status: 'in_progress', ...(item.type === 'message' ? { content: [] } : {}) },
    });
    if (text !== '') sse(res, 'response.output_text.delta', { item_id: item.id, output_index: 0, content_index: 0, delta: text });
    sse(res, 'response.output_item.done', { output_index: 0, item });
    sse(res, 'response.completed', {
      response: {
        id: responseId,
        object: 'response',
        status: 'completed',
        model,
        output: [item],
        usage: usageOf(behaviour.kind === 'reply' ? behaviour.usage : undefined),
      },
    });
    res.end();
  },
};

/** The Responses API's usage of a reply: `input_tokens` counts the cached part too. */
function usageOf(u: FakeUsage | undefined) {
  const input = u ? u.input + (u.cacheRead ?? 0) : 10;
  const output = u ? u.output : 5;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: u?.cacheRead ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

/**
 * Replies held until the test says so (a `slow` turn that ends at `finish`), for any protocol:
 * wraps a handler so that a behaviour made by `hold()` is answered only after `release()`. A
 * held reply keeps the CLI's model request open, so the runtime's turn stays active meanwhile.
 */
export function holdableReplies(handler: ProtocolHandler): {
  readonly handler: ProtocolHandler;
  hold(text: string): { readonly behaviour: FakeBehaviour; release(): void };
} {
  const gates = new WeakMap<object, Promise<void>>();
  return {
    handler: {
      protocol: handler.protocol,
      matches: (method, path) => handler.matches(method, path),
      promptOf: (body) => handler.promptOf(body),
      answer(res, body, behaviour) {
        const gate = gates.get(behaviour);
        if (!gate) return handler.answer(res, body, behaviour);
        void gate.then(() => {
          if (!res.destroyed) handler.answer(res, body, behaviour);
        });
      },
    },
    hold(text) {
      let release!: () => void;
      const behaviour: FakeBehaviour = { kind: 'reply', text };
      gates.set(behaviour, new Promise<void>((resolve) => (release = resolve)));
      return { behaviour, release: () => release() };
    },
  };
}
