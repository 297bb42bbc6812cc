import type { FastifyReply, FastifyRequest } from 'fastify';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from '@a2a-js/sdk/server';
import { isLegacyJsonRpcMethod, isV1JsonRpcMethod } from '@a2a-js/sdk/compat/v0_3';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { SendMessageRequest, SubscribeToTaskRequest, type AgentCard, type Task } from '@a2a-js/sdk';
import { A2A_DEFAULTS } from '../../../../libs/config/component-defaults.ts';
import { BatonError, type ErrorCode } from '../../../../libs/domain/errors.ts';
import type { AgentRecord } from '../../../../libs/db/records.ts';
import { getAgent } from '../../../../libs/handoffs/manage-agents.ts';
import type { CoreDeps } from '../../../../libs/handoffs/ports.ts';
import type { EventFeed } from '../../../../libs/handoffs/event-feed.ts';
import { callerOf } from '../../route-context.ts';
import { a2aErrorFor, batonCodeOf } from './a2a-errors.ts';
import { agentCardOf } from './agent-cards.ts';
import type { A2aCall } from './a2a-call.ts';
import { BatonRequestHandler } from './baton-request-handler.ts';
import { legacyFrame, legacyStreamTarget } from './legacy-stream.ts';
import { A2A_LEGACY_PROTOCOL, A2A_PROTOCOL, requestId, requestedProtocol } from './protocol.ts';
import { streamTask, waitForTask, type StreamFraming } from './task-stream.ts';

/**
 * What of the gateway needs the A2A SDK, loaded by the first A2A request (routes/a2a/index.ts),
 * as the MCP SDK is: an API that never serves A2A never holds it (docs/PERFORMANCE.md, "Memory").
 */
export { jsonRpcRefusal } from './a2a-errors.ts';
export { agentCardOf, cardJson, rootCardOf } from './agent-cards.ts';

export interface RpcInput {
  readonly core: CoreDeps;
  readonly feed: EventFeed | undefined;
  readonly blockingSendMs: number | undefined;
  readonly project: string;
  readonly agent: AgentRecord;
}

/** Streamed by task-stream.ts on the event feed, not by the SDK's in-process event bus. */
const STREAMING = new Set(['SendStreamingMessage', 'SubscribeToTask', 'message/stream', 'tasks/resubscribe']);

/** Each promise method of `h`, its refusals turned into A2A errors carrying Baton's code. */
function guarded(
  h: BatonRequestHandler,
  request: FastifyRequest,
  wait: ((taskId: string) => Promise<Task>) | undefined,
  refused: (code: ErrorCode) => void = () => undefined,
): A2ARequestHandler {
  const g = <T>(p: () => Promise<T>, cancel = false): Promise<T> =>
    p().catch((err: unknown) => {
      const code = batonCodeOf(err);
      refused(code);
      if (code === 'internal_error' || !(err instanceof BatonError)) request.log.error({ err }, 'A2A call failed');
      throw a2aErrorFor(code, err instanceof Error ? err.message : String(err), cancel);
    });
  return {
    getAgentCard: () => h.getAgentCard(),
    getAuthenticatedExtendedAgentCard: () => g(() => h.getAuthenticatedExtendedAgentCard()),
    // Blocking unless the client asks otherwise (A2A's default), when the API follows the event log.
    sendMessage: (p, c) =>
      g(async () => {
        const t = await h.sendMessage(p, c);
        return wait && p.configuration?.returnImmediately !== true ? wait(t.id) : t;
      }),
    sendMessageStream: () => h.sendMessageStream(),
    getTask: (p) => g(() => h.getTask(p)),
    listTasks: (p) => g(() => h.listTasks(p)),
    cancelTask: (p) => g(() => h.cancelTask(p), true),
    createTaskPushNotificationConfig: (p, c) => g(() => h.createTaskPushNotificationConfig(p, c)),
    getTaskPushNotificationConfig: (p) => g(() => h.getTaskPushNotificationConfig(p)),
    listTaskPushNotificationConfigs: (p) => g(() => h.listTaskPushNotificationConfigs(p)),
    deleteTaskPushNotificationConfig: (p) => g(() => h.deleteTaskPushNotificationConfig(p)),
    resubscribe: () => h.resubscribe(),
  };
}

/** One JSON-RPC request to the agent `input.agent`, answered (or streamed) on `reply`. */
export async function answerRpc(request: FastifyRequest, reply: FastifyReply, input: RpcInput): Promise<FastifyReply> {
  const { core, project, agent } = input;
  const card = agentCardOf(request, agent, project, input.feed !== undefined);
  const context = new ServerCallContext({ requestedVersion: requestedProtocol(request.headers['a2a-version']) });
  const legacy = context.requestedVersion === A2A_LEGACY_PROTOCOL;
  try {
    validateVersion(context.requestedVersion, card, 'JSONRPC');
  } catch {
    throw new BatonError(
      'protocol_version_unsupported',
      `this agent speaks A2A ${A2A_PROTOCOL} (send the header A2A-Version: ${A2A_PROTOCOL}) and ${A2A_LEGACY_PROTOCOL} (no header)`,
    );
  }
  const body = request.body as Record<string, unknown>;
  const method = body['method'];
  // The version selects the method names: a 1.0 name without the header (or a 0.3 one with it) is the wrong version.
  if (legacy ? !isLegacyJsonRpcMethod(method) && isV1JsonRpcMethod(method) : isLegacyJsonRpcMethod(method))
    throw new BatonError(
      'protocol_version_unsupported',
      legacy
        ? `${String(method)} is an A2A ${A2A_PROTOCOL} method: send the header A2A-Version: ${A2A_PROTOCOL}`
        : `${String(method)} is an A2A ${A2A_LEGACY_PROTOCOL} method: send it without the A2A-Version header`,
    );
  const streaming = typeof method === 'string' && STREAMING.has(method);
  if (streaming && !input.feed)
    throw new BatonError('protocol_method_unsupported', `${String(method)} is not served by this API (no event feed)`);
  const caller = callerOf(request);
  const named = request.headers['x-baton-agent'];
  // As on /v1: an agent token naming another agent is refused, never ignored.
  if (caller.agent && typeof named === 'string' && named !== '' && named.toLowerCase() !== caller.agent.handle)
    throw new BatonError('identity_mismatch', `this token belongs to ${caller.agent.handle}; it cannot act as ${named.toLowerCase()}`);
  const sender = caller.agent?.handle ?? (typeof named === 'string' && named !== '' ? named.toLowerCase() : null);
  const viewed = caller.agent ? null : sender === null ? null : await getAgent(core, project, sender);
  const call: A2aCall = {
    core,
    project,
    agent,
    sender,
    tokenId: caller.tokenId,
    viewer: { agentId: caller.agent?.id ?? viewed?.id ?? null, tokenId: caller.tokenId, allOwners: false },
    card,
  };
  if (streaming && input.feed) {
    const handler = new BatonRequestHandler(call);
    const taskId = await streamedTaskId(handler, body, context, card, legacy);
    const framing: StreamFraming | undefined = legacy ? { version: A2A_LEGACY_PROTOCOL, frame: legacyFrame(card, context) } : undefined;
    await streamTask(
      request,
      reply,
      {
        core,
        feed: input.feed,
        project,
        viewer: call.viewer,
        handoffId: taskId,
        rpcId: requestId(body),
        read: () => handler.getTask({ tenant: '', id: taskId }),
      },
      framing,
    );
    return reply;
  }
  const handler = new BatonRequestHandler(call);
  const feed = input.feed;
  const wait = feed
    ? (taskId: string) =>
        waitForTask(
          { core, feed, project, viewer: call.viewer, handoffId: taskId, read: () => handler.getTask({ tenant: '', id: taskId }) },
          input.blockingSendMs ?? A2A_DEFAULTS.blockingSendMs,
          request.log,
        )
    : undefined;
  let refusal: ErrorCode | undefined;
  const guardedHandler = guarded(handler, request, wait, (code) => (refusal = code));
  const answer = legacy
    ? await new LegacyJsonRpcTransportHandler(guardedHandler).handle(body, context)
    : await new JsonRpcTransportHandler(guardedHandler).handle(body, context);
  if (Symbol.asyncIterator in answer) throw new Error('a stream was started for a method that does not stream');
  // 0.3's errors carry no ErrorInfo: Baton's code goes into their free-form data instead.
  const error = 'error' in answer ? (answer.error as { data?: unknown }) : undefined;
  if (legacy && error && refusal !== undefined) error.data ??= { batonCode: refusal };
  return reply.header('a2a-version', context.requestedVersion).send(answer);
}

/** The task a streaming request follows: the one a message creates (or continues), or the one it subscribes to. */
async function streamedTaskId(
  handler: BatonRequestHandler,
  body: Record<string, unknown>,
  context: ServerCallContext,
  card: AgentCard,
  legacy: boolean,
): Promise<string> {
  if (legacy) {
    const target = await legacyStreamTarget(body, context, card);
    return target.kind === 'send'
      ? (await handler.sendMessage(target.params, context)).id
      : (await handler.getTask({ tenant: '', id: target.id })).id;
  }
  const params = (typeof body['params'] === 'object' && body['params'] !== null ? body['params'] : {}) as Record<string, unknown>;
  return body['method'] === 'SendStreamingMessage'
    ? (await handler.sendMessage(SendMessageRequest.fromJSON(params), context)).id
    : (await handler.getTask({ tenant: '', id: SubscribeToTaskRequest.fromJSON(params).id })).id;
}
