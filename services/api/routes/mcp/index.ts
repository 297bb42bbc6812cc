import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest, InjectOptions } from 'fastify';
import { BatonError } from '../../../../libs/domain/errors.ts';
import { getAgent } from '../../../../libs/handoffs/manage-agents.ts';
import type { CoreDeps } from '../../../../libs/handoffs/ports.ts';
import type { AuthDeps } from '../../../../libs/handoffs/manage-tokens.ts';
import { ApiClient } from '../../../../libs/api-client/api-client.ts';
import { resolveIdentity } from '../../../../libs/mcp/resolve-identity.ts';
import { toolContext } from '../../../../libs/mcp/tool-context.ts';
import { NO_STORE } from '../../plugins/no-store.ts';
import { authenticateRequest } from '../../plugins/authenticate.ts';
import type { RequestLimiter } from '../../plugins/rate-limit.ts';
import { projectOf } from '../../route-context.ts';
import { Type } from 'typebox';
import { ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

/** For the OpenAPI document (plugins/openapi.ts): the MCP transport reads and answers the messages itself. */
const JsonRpcMessages = Type.Union(
  [Type.Object({ jsonrpc: Type.Literal('2.0') }, { additionalProperties: true }), Type.Array(Type.Unknown())],
  {
    description: 'one JSON-RPC 2.0 message of the Model Context Protocol (initialize, tools/list, tools/call, ...), or a batch',
  },
);
const McpPostSchema = {
  description: "Baton's MCP tools over streamable HTTP, stateless; an admin token names its agent with X-Baton-Agent.",
  headers: Type.Object({
    'x-baton-project': ProjectHeader.properties['x-baton-project'],
    'x-baton-agent': Type.Optional(Type.String({ maxLength: 64 })),
  }),
  body: JsonRpcMessages,
  response: { 200: Type.Unknown({ description: 'the JSON-RPC answer (202 with no body for a notification)' }), '4xx': ErrorBody },
};
const McpRefusedSchema = {
  description: 'No server-sent stream and no session: always 405 method_not_allowed.',
  response: { 405: ErrorBody },
};

export interface McpRouteOptions {
  /** Proves the caller, and checks the agent an admin names (the tools' work goes through /v1). */
  readonly core: AuthDeps & Pick<CoreDeps, 'agents'>;
  readonly defaultProject: string;
  /** The root app's inject: the tools call the API's own /v1 routes through it, in process. */
  readonly inject: FastifyInstance['inject'];
  /** A refused token spends the client address's budget here (an accepted one, in each /v1 call its tools make). */
  readonly limiter: RequestLimiter | undefined;
}

/** Where the in-process client "is"; never resolved, app.inject routes on the path alone. */
const SELF = 'http://baton.internal';

/**
 * A fetch that answers from the API's own routes (app.inject), so `/mcp` tools use the same
 * ApiClient as `baton mcp` and every call passes the same authentication, rate limit,
 * validation, visibility and audit as any other /v1 call, without a socket.
 */
export function injectFetch(inject: FastifyInstance['inject']): typeof fetch {
  const f = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const res = await inject({
      method: (init?.method ?? 'GET') as InjectOptions['method'],
      url: `${url.pathname}${url.search}`,
      headers: Object.fromEntries(new Headers(init?.headers).entries()),
      ...(typeof init?.body === 'string' ? { payload: init.body } : {}),
    });
    const headers = new Headers();
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : String(v));
    const empty = res.statusCode === 204 || res.statusCode === 304 || res.rawPayload.length === 0;
    return new Response(empty ? null : res.rawPayload, { status: res.statusCode, headers });
  };
  return f;
}

/**
 * The MCP SDK and Baton's tool definitions, loaded by the first `POST /mcp` rather than at
 * start: an API that never serves MCP never holds them (docs/PERFORMANCE.md, "Memory").
 */
let mcpModules:
  | Promise<{
      Transport: typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js').StreamableHTTPServerTransport;
      createMcpServer: typeof import('../../../../libs/mcp/create-mcp-server.ts').createMcpServer;
    }>
  | undefined;
function loadMcp() {
  mcpModules ??= Promise.all([
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('../../../../libs/mcp/create-mcp-server.ts'),
  ]).then(
    ([sdk, tools]) => ({ Transport: sdk.StreamableHTTPServerTransport, createMcpServer: tools.createMcpServer }),
    (err: unknown) => {
      mcpModules = undefined;
      throw err;
    },
  );
  return mcpModules;
}

const header = (value: string | string[] | undefined) => (typeof value === 'string' && value !== '' ? value : undefined);

/**
 * `POST /mcp`: Baton's MCP tools over streamable HTTP, stateless (a server and transport per
 * request, JSON answers). The request's bearer token is the identity (401 before any MCP
 * message is read); an admin token names its agent with `X-Baton-Agent` (403 `forbidden`
 * without it). GET and DELETE (server-sent streams, sessions) are 405: there are no sessions.
 */
const mcpRoutes: FastifyPluginAsync<McpRouteOptions> = async (app, opts) => {
  tagRoutes(app, 'mcp');
  const { core, defaultProject, inject } = opts;

  // Before the body is read: a refused token is answered 401 (and counted per client address) without parsing anything.
  const onRequest = async (request: FastifyRequest, reply: FastifyReply) => {
    await authenticateRequest(request, reply, core, opts.limiter, { limitAccepted: false });
  };
  app.post('/mcp', { schema: McpPostSchema, onRequest }, async (request, reply) => {
    const caller = request.caller;
    if (!caller) throw new BatonError('unauthenticated', 'no caller');
    const project = projectOf(request, defaultProject);
    const identity = resolveIdentity(
      { tokenId: caller.tokenId, admin: caller.admin, agent: caller.agent?.handle ?? null, project },
      header(request.headers['x-baton-agent']),
      { nameWith: 'the X-Baton-Agent header' },
    );
    if (identity.admin) await getAgent(core, project, identity.agent);
    const token = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1];
    const api = new ApiClient(
      SELF,
      caller.admin ? header(request.headers['x-baton-project']) : undefined,
      token,
      undefined,
      injectFetch(inject),
    );
    const { Transport, createMcpServer } = await loadMcp();
    const server = createMcpServer(toolContext(api, identity));
    const transport = new Transport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    reply.raw.setHeader('cache-control', NO_STORE);
    reply.hijack();
    reply.raw.once('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    } catch (err) {
      request.log.error({ err }, 'mcp request failed');
      if (!reply.raw.headersSent) {
        reply.raw
          .writeHead(500, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'internal error' }, id: null }));
      }
    }
  });

  // 405 is what MCP clients expect when a server offers no stream on GET and no sessions.
  const noSessions = async (_request: unknown, reply: { header(k: string, v: string): unknown }) => {
    reply.header('allow', 'POST');
    throw new BatonError(
      'method_not_allowed',
      'Baton serves MCP statelessly: POST /mcp only (no server-sent stream, no session to delete)',
    );
  };
  app.get('/mcp', { schema: McpRefusedSchema }, noSessions);
  app.delete('/mcp', { schema: McpRefusedSchema }, noSessions);
};

export default mcpRoutes;
