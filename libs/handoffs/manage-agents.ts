import { BatonError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import type { AgentRecord, ProviderName } from '../db/records.ts';
import { USABLE_PROVIDERS } from '../adapters/implemented-providers.ts';
import type { CoreDeps } from './ports.ts';
import { resolveProject } from './resolve-project.ts';

export interface RegisterAgentInput {
  project: string;
  handle: string;
  displayName?: string | undefined;
  provider: ProviderName;
  providerSettings?: Record<string, unknown> | undefined;
  /** The session/endpoint turns go to; defaults to the handle for demo agents. */
  deliveryTarget?: string | null | undefined;
}

/**
 * Registers an agent in a project. Handles are case-insensitive (stored lower-case). A removed
 * agent's handle can be registered again; it gets a new generation, so handoffs enrolled for
 * the old one are never redirected to it.
 * @throws BatonError unknown_provider, project_not_found, agent_exists
 */
export async function registerAgent(deps: CoreDeps, input: RegisterAgentInput): Promise<AgentRecord> {
  if (!USABLE_PROVIDERS.includes(input.provider)) {
    throw new BatonError('unknown_provider', `no adapter for provider ${input.provider} yet; use one of ${USABLE_PROVIDERS.join(', ')}`);
  }
  const project = await resolveProject(deps, input.project);
  const handle = input.handle.toLowerCase();
  const deliveryTarget =
    input.deliveryTarget !== undefined ? input.deliveryTarget : input.provider === 'manual' ? null : handle;
  const agent = await deps.agents.insertOrRevive({
    id: newId(deps.clock.now().getTime()),
    projectId: project.id,
    handle,
    displayName: input.displayName ?? input.handle,
    provider: input.provider,
    providerSettings: input.providerSettings ?? {},
    deliveryTarget,
    at: deps.clock.now(),
  });
  if (!agent) throw new BatonError('agent_exists', `agent ${JSON.stringify(handle)} already exists in project ${project.slug}`);
  deps.logger.info({ agentId: agent.id, handle, provider: agent.provider }, 'agent registered');
  return agent;
}

export async function listAgents(deps: CoreDeps, projectSlug: string): Promise<AgentRecord[]> {
  const project = await resolveProject(deps, projectSlug);
  return deps.agents.listActive(project.id);
}

/** @throws BatonError project_not_found, agent_not_found */
export async function getAgent(deps: CoreDeps, projectSlug: string, handle: string): Promise<AgentRecord> {
  const project = await resolveProject(deps, projectSlug);
  const agent = await deps.agents.findActive(project.id, handle.toLowerCase());
  if (!agent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(handle)} in project ${project.slug}`);
  return agent;
}

/**
 * Removes an agent. Its open handoffs are not redirected: when their turn comes they become
 * UNAVAILABLE. History keeps the agent as sender and recipient.
 * @throws BatonError project_not_found, agent_not_found
 */
export async function removeAgent(deps: CoreDeps, projectSlug: string, handle: string): Promise<void> {
  const project = await resolveProject(deps, projectSlug);
  const removed = await deps.agents.remove(project.id, handle.toLowerCase(), deps.clock.now());
  if (!removed) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(handle)} in project ${project.slug}`);
  deps.logger.info({ handle, project: project.slug }, 'agent removed');
}
