import type { FastifyError, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from '@a2a-js/sdk/server';
import { BatonError } from '../../../../libs/domain/errors.ts';
import { getAgent, listAgents } from '../../../../libs/handoffs/manage-agents.ts';
import type { CoreDeps } from '../../../../libs/handoffs/ports.ts';
import type { EventFeed } from '../../../../libs/handoffs/event-feed.ts';
import { SendMessageRequest, SubscribeToTaskRequest } from '@a2a-js/sdk';
import { streamTask, waitForTask } from './task-stream.ts';
import { A2A_DEFAULTS } from '../../../../libs/config/component-defaults.ts';
import type { Task } from '@a2a-js/sdk';
import { authenticateRequest } from '../../plugins/authenticate.ts';
import { toBatonError } from '../../plugins/error-handler.ts';
import type { RequestLimiter } from '../../plugins/rate-limit.ts';
import { tagRoutes } from '../../plugins/openapi.ts';
import { callerOf, projectOf } from '../../route-context.ts';
import { AgentParams, ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import { a2aErrorFor, batonCodeOf, jsonRpcRefusal } from './a2a-errors.ts';
import { A2A_PROTOCOL, agentCardOf, cardJson } from './agent-cards.ts';
import { BatonRequestHandler, type A2aCall } from './baton-request-handler.ts';

export interface A2aRouteOptions {
  readonly core: CoreDeps;
  readonly defaultProject: string;
  readonly limiter: RequestLimiter | undefined;
  /** Follows the event log for the task streams; absent, the streaming methods are refused and the cards say `streaming: false`. */
  readonly feed: EventFeed | undefined;
  /** How long a blocking SendMessage waits (default A2A_DEFAULTS.blockingSendMs). */
  readonly blockingSendMs?: number | undefined;
}

const Headers = Type.Object({
  'x-baton-project': ProjectHeader.properties['x-baton-project'],
  'x-baton-agent': Type.Optional(Type.String({ maxLength: 64 })),
  'a2a-version': Type.Optional(Type.String({ maxLength: 16 })),
});
const CardJson = Type.Unknown({ description: 'an A2A 1.0 agent card (ProtoJSON: supportedInterfaces, securitySchemes, skills, ...)' });
const JsonRpcBody = Type.Object(
  { jsonrpc: Type.Literal('2.0') },
  { additionalProperties: true, description: 'one A2A 1.0 JSON-RPC request: SendMessage, GetTask, CancelTask, ...' },
);

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

/**
 * The A2A gateway (protocol 1.0, JSON-RPC): every agent of the caller's project has a card and
 * an endpoint. Authentication and the rate limit are /v1's (a bearer token; a refused one spends
 * the address's budget); an agent outside the caller's project answers exactly like a missing
 * one. The endpoint's every refusal, the token's included, is a JSON-RPC error with Baton's code
 * in its data (a2a-errors.ts); the cards' refusals are Baton's usual `{ error }`.
 */
const a2aRoutes: FastifyPluginAsyncTypebox<A2aRouteOptions> = async (app, opts) => {
  tagRoutes(app, 'a2a');
  const { core, defaultProject } = opts;

  app.addHook('onRequest', async (request, reply) => {
    await authenticateRequest(request, reply, core, opts.limiter);
  });
  app.setErrorHandler((err: FastifyError, request, reply) => {
    // A card's refusal goes to the app's handler: Baton's { error } shape.
    if (request.method !== 'POST') throw err;
    const be = toBatonError(err);
    if (be.status >= 500) request.log.error({ err: be.cause ?? err, code: be.code }, 'request failed');
    if (be.status === 429) reply.header('retry-after', String(be.details?.['retryAfterSeconds'] ?? 1));
    const refusal = jsonRpcRefusal(be, requestId(request.body));
    void reply.status(refusal.status).send(refusal.body);
  });

  /** The agent the path names, as the caller may see it (another project's is agent_not_found, as a missing one). */
  const agentOf = async (request: FastifyRequest, handle: string) => {
    const project = projectOf(request, defaultProject);
    return { project, agent: await getAgent(core, project, handle) };
  };

  app.get(
    '/a2a/agents',
    { schema: { headers: ProjectHeader, response: { 200: Type.Object({ items: Type.Array(CardJson) }), '4xx': ErrorBody } } },
    async (request) => {
      const project = projectOf(request, defaultProject);
      return { items: (await listAgents(core, project)).map((a) => cardJson(agentCardOf(request, a, project, opts.feed !== undefined))) };
    },
  );

  app.get(
    '/a2a/agents/:id/.well-known/agent-card.json',
    { schema: { headers: ProjectHeader, params: AgentParams, response: { 200: CardJson, '4xx': ErrorBody } } },
    async (request) => {
      const { project, agent } = await agentOf(request, request.params.id);
      return cardJson(agentCardOf(request, agent, project, opts.feed !== undefined));
    },
  );

  app.post(
    '/a2a/agents/:id',
    {
      schema: {
        description: "The agent's A2A JSON-RPC endpoint (protocol 1.0: send `A2A-Version: 1.0`).",
        headers: Headers,
        params: AgentParams,
        body: JsonRpcBody,
        response: { 200: Type.Unknown({ description: 'the JSON-RPC answer' }), '4xx': Type.Unknown({ description: 'a JSON-RPC error' }) },
      },
    },
    async (request, reply) => {
      const { project, agent } = await agentOf(request, request.params.id);
      const card = agentCardOf(request, agent, project, opts.feed !== undefined);
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
      if (streaming && !opts.feed)
        throw new BatonError('protocol_method_unsupported', `${String(method)} is not served by this API (no event feed)`);
      const caller = callerOf(request);
      const named = request.headers['x-baton-agent'];
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
      if (streaming && opts.feed) {
        const handler = new BatonRequestHandler(call);
        const params = (typeof body['params'] === 'object' && body['params'] !== null ? body['params'] : {}) as Record<string, unknown>;
        const taskId =
          method === 'SendStreamingMessage'
            ? (await handler.sendMessage(SendMessageRequest.fromJSON(params))).id
            : (await handler.getTask({ tenant: '', id: SubscribeToTaskRequest.fromJSON(params).id })).id;
        await streamTask(request, reply, {
          core,
          feed: opts.feed,
          project,
          viewer: call.viewer,
          handoffId: taskId,
          rpcId: requestId(body),
          read: () => handler.getTask({ tenant: '', id: taskId }),
        });
        return reply;
      }
      const handler = new BatonRequestHandler(call);
      const feed = opts.feed;
      const wait = feed
        ? (taskId: string) =>
            waitForTask(
              { core, feed, project, viewer: call.viewer, handoffId: taskId, read: () => handler.getTask({ tenant: '', id: taskId }) },
              opts.blockingSendMs ?? A2A_DEFAULTS.blockingSendMs,
              request.log,
            )
        : undefined;
      const answer = await new JsonRpcTransportHandler(guarded(handler, request, wait)).handle(body, context);
      if (Symbol.asyncIterator in answer) throw new Error('a stream was started for a method that does not stream');
      return reply.header('a2a-version', A2A_PROTOCOL).send(answer);
    },
  );
};

function requestId(body: unknown): string | number | null {
  const id = (body as { id?: unknown } | null | undefined)?.id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

export default a2aRoutes;
