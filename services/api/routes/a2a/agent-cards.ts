import { AgentCard as AgentCardCodec, type AgentCard } from '@a2a-js/sdk';
import type { FastifyRequest } from 'fastify';
import { agentCardOfSettings } from '../../../../libs/domain/agent-card.ts';
import type { AgentRecord } from '../../../../libs/db/records.ts';
import { A2A_LEGACY_PROTOCOL, A2A_PROTOCOL } from './protocol.ts';

/** Where an agent's JSON-RPC endpoint is: its card's interface URL, on the host the caller used. */
export function agentUrl(request: FastifyRequest, handle: string): string {
  return `${request.protocol}://${request.host}/a2a/agents/${encodeURIComponent(handle)}`;
}

/** What every card of the gateway says alike: its capabilities, Baton's bearer tokens, its modes. */
function commonCard(streaming: boolean): Omit<AgentCard, 'name' | 'description' | 'supportedInterfaces' | 'version' | 'skills'> {
  return {
    provider: undefined,
    capabilities: { streaming, pushNotifications: true, extensions: [], extendedAgentCard: false },
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
    signatures: [],
  };
}

/**
 * An agent's A2A card (protocol 1.0): one JSON-RPC endpoint, declared for 1.0 and 0.3, Baton's bearer tokens as its only
 * security scheme, its description and skills as registered (else one skill, `handoff`, from its
 * display name and provider), streaming
 * when the API follows the event log, and push notifications (delivered by the workers' subscription
 * dispatcher: libs/handoffs/subscription-dispatcher.ts).
 */
export function agentCardOf(request: FastifyRequest, agent: AgentRecord, project: string, streaming: boolean): AgentCard {
  const given = agentCardOfSettings(agent.providerSettings);
  const modes = { inputModes: ['text/plain'], outputModes: ['text/plain', 'application/json'], securityRequirements: [] };
  const skills = given.skills?.map((s) => ({ ...s, tags: [...s.tags], examples: [...s.examples], ...modes })) ?? [
    {
      id: 'handoff',
      name: agent.displayName,
      description: `Takes a message as a Baton handoff to ${agent.handle} (a ${agent.provider} agent of project ${project}), delivered as exactly one turn.`,
      tags: ['baton', agent.provider],
      examples: [],
      ...modes,
    },
  ];
  return {
    ...commonCard(streaming),
    name: agent.displayName,
    description: given.description ?? `Baton agent ${agent.handle} of project ${project}`,
    // One endpoint, both versions: the A2A-Version header selects the handler (gateway.ts).
    supportedInterfaces: [A2A_PROTOCOL, A2A_LEGACY_PROTOCOL].map((protocolVersion) => ({
      url: agentUrl(request, agent.handle),
      protocolBinding: 'JSONRPC',
      tenant: '',
      protocolVersion,
    })),
    version: String(agent.generation),
    skills,
  };
}

/**
 * The gateway's own card (`GET /.well-known/agent-card.json`, A2A discovery): Baton as a
 * directory, one skill per agent the caller may see (those of its project), each naming its
 * card's URL; it has no endpoint of its own (`supportedInterfaces` is empty: follow an agent's
 * card). `agents` is empty for an unauthenticated caller.
 */
export function rootCardOf(request: FastifyRequest, agents: readonly AgentRecord[], project: string | null, streaming: boolean): AgentCard {
  const base = `${request.protocol}://${request.host}`;
  return {
    ...commonCard(streaming),
    name: 'Baton',
    description:
      project === null
        ? `Baton's A2A gateway: send a Baton token to see your project's agents (their cards list at ${base}/a2a/agents)`
        : `Baton's A2A gateway for project ${project}: each skill is an agent; its card is at the URL its description names`,
    supportedInterfaces: [],
    version: '1',
    skills: agents.map((a) => ({
      id: a.handle,
      name: a.displayName,
      description: `Baton agent ${a.handle} (${a.provider}); card: ${agentUrl(request, a.handle)}/.well-known/agent-card.json`,
      tags: ['baton', 'agent', a.provider],
      examples: [],
      inputModes: ['text/plain'],
      outputModes: ['text/plain', 'application/json'],
      securityRequirements: [],
    })),
  };
}

/** The card as it travels (ProtoJSON). */
export function cardJson(card: AgentCard): unknown {
  return AgentCardCodec.toJSON(card);
}
