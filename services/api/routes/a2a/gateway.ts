import type { FastifyReply, FastifyRequest } from 'fastify';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from '@a2a-js/sdk/server';
import { SendMessageRequest, SubscribeToTaskRequest, type Task } from '@a2a-js/sdk';
import { A2A_DEFAULTS } from '../../../../libs/config/component-defaults.ts';
import { BatonError } from '../../../../libs/domain/errors.ts';
import type { AgentRecord } from '../../../../libs/db/records.ts';
import { getAgent } from '../../../../libs/handoffs/manage-agents.ts';
import type { CoreDeps } from '../../../../libs/handoffs/ports.ts';
import type { EventFeed } from '../../../../libs/handoffs/event-feed.ts';
import { callerOf } from '../../route-context.ts';
import { a2aErrorFor, batonCodeOf } from './a2a-errors.ts';
import { agentCardOf } from './agent-cards.ts';
import { BatonRequestHandler, type A2aCall } from './baton-request-handler.ts';
import { A2A_PROTOCOL, requestId } from './protocol.ts';
import { streamTask, waitForTask } from './task-stream.ts';

/**
 * What of the gateway needs the A2A SDK, loaded by the first A2A request (routes/a2a/index.ts),
 * as the MCP SDK is: an API that never serves A2A never holds it (docs/PERFORMANCE.md, "Memory").
 */
export { jsonRpcRefusal } from './a2a-errors.ts';
export { agentCardOf, cardJson } from './agent-cards.ts';

export interface RpcInput {
  readonly core: CoreDeps;
  readonly feed: EventFeed | undefined;
  readonly blockingSendMs: number | undefined;
  readonly project: string;
  readonly agent: AgentRecord;
}

/** Streamed by task-stream.ts on the event feed, not by the SDK's in-process event bus. */
const STREAMING = new Set(['SendStreamingMessage', 'SubscribeToTask']);

/** Each promise method of `h`, its refusals turned into A2A errors carrying Baton's code. */
function guarded(
  h: BatonRequestHandler,
  request: FastifyRequest,
  wait: ((taskId: string) => Promise<Task>) | undefined,
): A2ARequestHandler {
  const g = <T>(p: () => Promise<T>): Promise<T> =>
    p().catch((err: unknown) => {
      const code = batonCodeOf(err);
      if (code === 'internal_error' || !(err instanceof BatonError)) request.log.error({ err }, 'A2A call failed');
      throw a2aErrorFor(code, err instanceof Error ? err.message : String(err));
    });
  return {
    getAgentCard: () => h.getAgentCard(),
    getAuthenticatedExtendedAgentCard: () => g(() => h.getAuthenticatedExtendedAgentCard()),
    // Blocking unless the client asks otherwise (A2A's default), when the API follows the event log.
    sendMessage: (p) =>
      g(async () => {
        const t = await h.sendMessage(p);
        return wait && p.configuration?.returnImmediately !== true ? wait(t.id) : t;
      }),
    sendMessageStream: () => h.sendMessageStream(),
    getTask: (p) => g(() => h.getTask(p)),
    listTasks: () => g(() => h.listTasks()),
    cancelTask: (p) => g(() => h.cancelTask(p)),
    createTaskPushNotificationConfig: () => g(() => h.createTaskPushNotificationConfig()),
    getTaskPushNotificationConfig: (p, c) => g(() => h.getTaskPushNotificationConfig(p, c)),
    listTaskPushNotificationConfigs: (p) => g(() => h.listTaskPushNotificationConfigs(p)),
    deleteTaskPushNotificationConfig: (p) => g(() => h.deleteTaskPushNotificationConfig(p)),
    resubscribe: () => h.resubscribe(),
  };
}

/** One JSON-RPC request to the agent `input.agent`, answered (or streamed) on `reply`. */
export async function answerRpc(request: FastifyRequest, reply: FastifyReply, input: RpcInput): Promise<FastifyReply> {
  const { core, project, agent } = input;
  const card = agentCardOf(request, agent, project, input.feed !== undefined);
  const version = request.headers['a2a-version'];
  const context = new ServerCallContext({ requestedVersion: typeof version === 'string' && version !== '' ? version : '0.3' });
  try {
    validateVersion(context.requestedVersion, card, 'JSONRPC');
  } catch {
    throw new BatonError(
      'protocol_version_unsupported',
      `this agent speaks A2A ${A2A_PROTOCOL}: send the header A2A-Version: ${A2A_PROTOCOL}`,
    );
  }
  const body = request.body as Record<string, unknown>;
  const method = body['method'];
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
    const params = (typeof body['params'] === 'object' && body['params'] !== null ? body['params'] : {}) as Record<string, unknown>;
    const taskId =
      method === 'SendStreamingMessage'
        ? (await handler.sendMessage(SendMessageRequest.fromJSON(params))).id
        : (await handler.getTask({ tenant: '', id: SubscribeToTaskRequest.fromJSON(params).id })).id;
    await streamTask(request, reply, {
      core,
      feed: input.feed,
      project,
      viewer: call.viewer,
      handoffId: taskId,
      rpcId: requestId(body),
      read: () => handler.getTask({ tenant: '', id: taskId }),
    });
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
  const answer = await new JsonRpcTransportHandler(guarded(handler, request, wait)).handle(body, context);
  if (Symbol.asyncIterator in answer) throw new Error('a stream was started for a method that does not stream');
  return reply.header('a2a-version', A2A_PROTOCOL).send(answer);
}
