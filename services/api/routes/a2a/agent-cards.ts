import { AgentCard as AgentCardCodec, type AgentCard } from '@a2a-js/sdk';
import type { FastifyRequest } from 'fastify';
import type { AgentRecord } from '../../../../libs/db/records.ts';
import { A2A_PROTOCOL } from './protocol.ts';

/** Where an agent's JSON-RPC endpoint is: its card's interface URL, on the host the caller used. */
export function agentUrl(request: FastifyRequest, handle: string): string {
  return `${request.protocol}://${request.host}/a2a/agents/${encodeURIComponent(handle)}`;
}

/**
 * An agent's A2A card (protocol 1.0): one JSON-RPC interface, Baton's bearer tokens as its only
 * security scheme, one skill from its registration (its display name and provider), streaming
 * when the API follows the event log, and no push notifications (not served yet).
 */
export function agentCardOf(request: FastifyRequest, agent: AgentRecord, project: string, streaming: boolean): AgentCard {
  const skill = {
    id: 'handoff',
    name: agent.displayName,
    description: `Takes a message as a Baton handoff to ${agent.handle} (a ${agent.provider} agent of project ${project}), delivered as exactly one turn.`,
    tags: ['baton', agent.provider],
    examples: [],
    inputModes: ['text/plain'],
    outputModes: ['text/plain', 'application/json'],
    securityRequirements: [],
  };
  return {
    name: agent.displayName,
    description: `Baton agent ${agent.handle} of project ${project}`,
    supportedInterfaces: [{ url: agentUrl(request, agent.handle), protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL }],
    provider: undefined,
    version: String(agent.generation),
    capabilities: { streaming, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      baton: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: {
            description: "a Baton agent token (or an admin's, naming its agent with X-Baton-Agent)",
            scheme: 'Bearer',
            bearerFormat: '',
          },
        },
      },
    },
    securityRequirements: [{ schemes: { baton: { list: [] } } }],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: [skill],
    signatures: [],
  };
}

/** The card as it travels (ProtoJSON). */
export function cardJson(card: AgentCard): unknown {
  return AgentCardCodec.toJSON(card);
}
