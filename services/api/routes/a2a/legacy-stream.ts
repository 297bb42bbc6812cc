import type { AgentCard, SendMessageRequest, StreamResponse } from '@a2a-js/sdk';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';

/**
 * The 0.3 streaming methods (`message/stream`, `tasks/resubscribe`) through the SDK's legacy
 * JSON-RPC handler: it translates the 0.3 request into the 1.0 one Baton answers (the task
 * stream of task-stream.ts, on the event feed), and each 1.0 event back into its 0.3 shape.
 * Nothing here translates by hand; the SDK's compat layer does both ways.
 */
export type LegacyStreamTarget = { kind: 'send'; params: SendMessageRequest } | { kind: 'subscribe'; id: string };

/** A handler that answers only the streaming methods, with the events it is given. */
function streamingOnly(card: AgentCard, on: (target: LegacyStreamTarget) => AsyncGenerator<StreamResponse>): A2ARequestHandler {
  const refuse = () => Promise.reject(new Error('not a streaming method'));
  return {
    getAgentCard: () => Promise.resolve({ ...card, capabilities: { ...card.capabilities!, streaming: true } }),
    getAuthenticatedExtendedAgentCard: refuse,
    sendMessage: refuse,
    sendMessageStream: (params) => on({ kind: 'send', params }),
    getTask: refuse,
    listTasks: refuse,
    cancelTask: refuse,
    createTaskPushNotificationConfig: refuse,
    getTaskPushNotificationConfig: refuse,
    listTaskPushNotificationConfigs: refuse,
    deleteTaskPushNotificationConfig: refuse,
    resubscribe: (params) => on({ kind: 'subscribe', id: params.id }),
  };
}

// eslint-disable-next-line require-yield -- only the request is wanted
async function* nothing(): AsyncGenerator<StreamResponse> {
  await Promise.resolve();
}

/**
 * What a 0.3 streaming request asks for, in 1.0 terms.
 * @throws the SDK's A2A error (invalid params) for a request it cannot read
 */
export async function legacyStreamTarget(
  body: Record<string, unknown>,
  context: ServerCallContext,
  card: AgentCard,
): Promise<LegacyStreamTarget> {
  let target: LegacyStreamTarget | undefined;
  const answer = await new LegacyJsonRpcTransportHandler(
    streamingOnly(card, (t) => {
      target = t;
      return nothing();
    }),
  ).handle(body, context);
  if (!target || !(Symbol.asyncIterator in answer))
    throw Object.assign(new Error('the 0.3 stream request could not be read'), { name: 'RequestMalformedError' });
  return target;
}

/** One 1.0 stream event as the 0.3 server-sent event (a JSON-RPC answer) the SDK's legacy handler writes. */
export function legacyFrame(
  card: AgentCard,
  context: ServerCallContext,
): (r: StreamResponse, rpcId: string | number | null) => Promise<string> {
  return async (r, rpcId) => {
    const one = async function* () {
      await Promise.resolve();
      yield r;
    };
    const answer = await new LegacyJsonRpcTransportHandler(streamingOnly(card, one)).handle(
      { jsonrpc: '2.0', id: rpcId, method: 'tasks/resubscribe', params: { id: 'event' } },
      context,
    );
    if (!(Symbol.asyncIterator in answer)) throw new Error('the SDK did not translate a stream event');
    for await (const envelope of answer) return `data: ${JSON.stringify(envelope)}\n\n`;
    throw new Error('the SDK did not translate a stream event');
  };
}
