import type { FastifyError, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { getAgent, listAgents } from '../../../../libs/handoffs/manage-agents.ts';
import type { CoreDeps } from '../../../../libs/handoffs/ports.ts';
import type { EventFeed } from '../../../../libs/handoffs/event-feed.ts';
import { authenticateRequest } from '../../plugins/authenticate.ts';
import { toBatonError } from '../../plugins/error-handler.ts';
import type { RequestLimiter } from '../../plugins/rate-limit.ts';
import { tagRoutes } from '../../plugins/openapi.ts';
import { projectOf } from '../../route-context.ts';
import { AgentParams, ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import { requestId } from './protocol.ts';

/** The A2A SDK and what uses it, loaded by the first A2A request (gateway.ts). */
let gatewayModule: Promise<typeof import('./gateway.ts')> | undefined;
function loadGateway() {
  gatewayModule ??= import('./gateway.ts').then(
    (m) => m,
    (err: unknown) => {
      gatewayModule = undefined;
      throw err;
    },
  );
  return gatewayModule;
}

export interface A2aRouteOptions {
  readonly core: CoreDeps;
  readonly defaultProject: string;
  readonly limiter: RequestLimiter | undefined;
  /** Follows the event log for the task streams; absent, the streaming methods are refused and the cards say `streaming: false`. */
  readonly feed: EventFeed | undefined;
  /** How long a blocking SendMessage waits (default A2A_DEFAULTS.blockingSendMs). */
  readonly blockingSendMs?: number | undefined;
}

const ROOT_CARD = '/.well-known/agent-card.json';

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
    // The root card is A2A discovery: a caller without a token gets it too, with no agents.
    if (request.routeOptions.url === ROOT_CARD && request.headers.authorization === undefined) {
      if (opts.limiter) await opts.limiter(request, reply);
      return;
    }
    await authenticateRequest(request, reply, core, opts.limiter);
  });
  app.setErrorHandler(async (err: FastifyError, request, reply) => {
    // A card's refusal goes to the app's handler: Baton's { error } shape.
    if (request.method !== 'POST') throw err;
    const { jsonRpcRefusal } = await loadGateway();
    const be = toBatonError(err);
    if (be.status >= 500) request.log.error({ err: be.cause ?? err, code: be.code }, 'request failed');
    if (be.status === 429) reply.header('retry-after', String(be.details?.['retryAfterSeconds'] ?? 1));
    const refusal = jsonRpcRefusal(be, requestId(request.body));
    return reply.status(refusal.status).send(refusal.body);
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
      const { agentCardOf, cardJson } = await loadGateway();
      return { items: (await listAgents(core, project)).map((a) => cardJson(agentCardOf(request, a, project, opts.feed !== undefined))) };
    },
  );

  app.get(
    ROOT_CARD,
    {
      schema: {
        description: "Baton's A2A card (discovery): one skill per agent the caller may see; none without a token.",
        headers: ProjectHeader,
        response: { 200: CardJson, '4xx': ErrorBody },
      },
    },
    async (request) => {
      const { rootCardOf, cardJson } = await loadGateway();
      const streaming = opts.feed !== undefined;
      if (request.caller === undefined) return cardJson(rootCardOf(request, [], null, streaming));
      const project = projectOf(request, defaultProject);
      return cardJson(rootCardOf(request, await listAgents(core, project), project, streaming));
    },
  );

  app.get(
    '/a2a/agents/:id/.well-known/agent-card.json',
    { schema: { headers: ProjectHeader, params: AgentParams, response: { 200: CardJson, '4xx': ErrorBody } } },
    async (request) => {
      const { project, agent } = await agentOf(request, request.params.id);
      const { agentCardOf, cardJson } = await loadGateway();
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
      const { answerRpc } = await loadGateway();
      return answerRpc(request, reply, { core, feed: opts.feed, blockingSendMs: opts.blockingSendMs, project, agent });
    },
  );
};

export default a2aRoutes;
