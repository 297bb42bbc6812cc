import { randomUUID } from 'node:crypto';
import { Role } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';

/** A fetch that sends a Baton token, as an A2A client's authentication does. */
export const withToken =
  (token: string): typeof fetch =>
  (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };

/** The SDK's JSON-RPC client of agent `agent` at the API `url`, holding `token`. */
export function a2aClient(url: string, token: string, agent: string, polling = true): Promise<Client> {
  const f = withToken(token);
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: f })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: f }),
      clientConfig: { polling },
    }),
  );
  // The trailing slash: the card path is resolved relative to the base URL.
  return factory.createFromUrl(`${url}/a2a/agents/${agent}/`);
}

/** A user's text message as the SDK's client sends it. */
export function userMessage(
  text: string,
  o: { messageId?: string; contextId?: string; taskId?: string; metadata?: Record<string, unknown> } = {},
) {
  return {
    messageId: o.messageId ?? randomUUID(),
    contextId: o.contextId ?? '',
    taskId: o.taskId ?? '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text' as const, value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    metadata: o.metadata,
    extensions: [],
    referenceTaskIds: [],
  };
}
