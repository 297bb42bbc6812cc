import { CARD_SETTINGS_KEY, checkAgentCard } from '../domain/agent-card.ts';
import { checkRoles } from '../domain/agent-roles.ts';
import { BatonError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import type { AgentRecord, ProviderName } from '../db/records.ts';
import { validateProviderSettings } from '../adapters/provider-specs.ts';
import { LIVE_TURN_STATES, type DeliveryState } from '../domain/delivery-states.ts';
import { TRANSITIONS } from '../domain/transitions.ts';
import { workMoveWhenDeliverySettles } from '../domain/work-states.ts';
import type { RemovalSettlement } from '../db/agent-repository.ts';
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
  /**
   * Worker pool (host affinity): only workers started with it in BATON_WORKER_POOLS deliver
   * to the agent. Unset or "default": the unnamed pool.
   */
  pool?: string | undefined;
  /** What its A2A card says of it (libs/domain/agent-card.ts); kept in its settings. */
  card?: { description?: unknown; skills?: unknown } | undefined;
  /** The roles it declares (libs/domain/agent-roles.ts); none when absent. */
  roles?: readonly unknown[] | undefined;
}

/**
 * Registers an agent in a project. Handles are case-insensitive (stored lower-case). A removed
 * agent's handle can be registered again; it gets a new generation, so handoffs enrolled for
 * the old one are never redirected to it. The agent belongs to the registering process's
 * deployment (`deps.deployment`), also when it is registered again: only that deployment's
 * workers deliver to it.
 * @throws BatonError unknown_provider, invalid_settings, invalid_agent_card, invalid_role, project_not_found, agent_exists
 */
export async function registerAgent(
  deps: Pick<CoreDeps, 'agents' | 'deployment' | 'clock' | 'logger'>,
  input: RegisterAgentInput,
): Promise<AgentRecord> {
  validateProviderSettings(input.provider, input.providerSettings ?? {});
  const card = input.card ? checkAgentCard(input.card) : {};
  const roles = checkRoles(input.roles ?? []);
  const providerSettings =
    Object.keys(card).length > 0 ? { ...input.providerSettings, [CARD_SETTINGS_KEY]: card } : (input.providerSettings ?? {});
  const project = await resolveProject(deps, input.project);
  const handle = input.handle.toLowerCase();
  const deliveryTarget = input.deliveryTarget !== undefined ? input.deliveryTarget : input.provider === 'manual' ? null : handle;
  const agent = await deps.agents.insertOrRevive({
    id: newId(deps.clock.now().getTime()),
    projectId: project.id,
    handle,
    displayName: input.displayName ?? input.handle,
    provider: input.provider,
    providerSettings,
    deliveryTarget,
    pool: input.pool === undefined || input.pool === 'default' ? '' : input.pool.toLowerCase(),
    deployment: deps.deployment,
    roles,
    at: deps.clock.now(),
  });
  if (!agent) throw new BatonError('agent_exists', `agent ${JSON.stringify(handle)} already exists in project ${project.slug}`);
  deps.logger.info({ agentId: agent.id, handle, provider: agent.provider, deployment: agent.deployment }, 'agent registered');
  return agent;
}

/** What an update may change; an absent field stays as it is. */
export interface UpdateAgentInput {
  /** Replaces the roles it declares (libs/domain/agent-roles.ts); `[]` clears them. */
  roles?: readonly unknown[] | undefined;
}

/**
 * Changes an active agent's declarations. Only its roles can change this way (provider, target
 * and pool are changed by registering it again after a removal). Its generation, tokens and
 * handoffs are untouched.
 * @throws BatonError invalid_role, project_not_found, agent_not_found
 */
export async function updateAgent(
  deps: Pick<CoreDeps, 'agents' | 'clock' | 'logger'>,
  projectSlug: string,
  handle: string,
  input: UpdateAgentInput,
): Promise<AgentRecord> {
  const roles = input.roles === undefined ? undefined : checkRoles(input.roles);
  const project = await resolveProject(deps, projectSlug);
  const name = handle.toLowerCase();
  const agent =
    roles === undefined
      ? await deps.agents.findActive(project.id, name)
      : await deps.agents.setRoles(project.id, name, roles, deps.clock.now());
  if (!agent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(handle)} in project ${project.slug}`);
  if (roles !== undefined) deps.logger.info({ agentId: agent.id, handle: name, roles }, 'agent roles set');
  return agent;
}

export async function listAgents(deps: Pick<CoreDeps, 'agents'>, projectSlug: string): Promise<AgentRecord[]> {
  const project = await resolveProject(deps, projectSlug);
  return deps.agents.listActive(project.id);
}

/** @throws BatonError project_not_found, agent_not_found */
export async function getAgent(deps: Pick<CoreDeps, 'agents'>, projectSlug: string, handle: string): Promise<AgentRecord> {
  const project = await resolveProject(deps, projectSlug);
  const agent = await deps.agents.findActive(project.id, handle.toLowerCase());
  if (!agent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(handle)} in project ${project.slug}`);
  return agent;
}

/** What a removal touches: the statement (`agents.remove`), the token cache it empties, the event publisher, the log. */
export type RemoveAgentDeps = Pick<CoreDeps, 'agents' | 'tokenCache' | 'events' | 'clock' | 'logger'>;

/**
 * Removes an agent. Its open handoffs are never redirected: in the removal's own statement,
 * every handoff to it that no turn has reached (waiting, busy, held, refused once, or pull-claimed)
 * becomes UNAVAILABLE and its work expired, each with its event rows. A turn already written
 * to its session (SENDING, ACCEPTED, RUNNING, UNCERTAIN) is left to be observed as usual.
 * History keeps the agent as sender and recipient. Its tokens are revoked in the same
 * statement, for good: registering the handle again does not bring them back.
 * @throws BatonError project_not_found, agent_not_found
 */
export async function removeAgent(
  deps: RemoveAgentDeps,
  projectSlug: string,
  handle: string,
  tokenId: string | null = null,
): Promise<void> {
  const project = await resolveProject(deps, projectSlug);
  const removed = await deps.agents.remove(
    project.id,
    handle.toLowerCase(),
    deps.clock.now(),
    recipientGone(handle.toLowerCase(), tokenId),
  );
  if (!removed) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(handle)} in project ${project.slug}`);
  // Its tokens were revoked in that statement.
  deps.tokenCache?.invalidate();
  deps.events.published(removed.eventIds);
  deps.logger.info({ handle, project: project.slug }, 'agent removed');
}

/** The removal's settlement, planned with the delivery table (recipient_gone) and the work table. */
function recipientGone(handle: string, tokenId: string | null): RemovalSettlement {
  const rule = TRANSITIONS.find((r) => r.event === 'recipient_gone');
  if (!rule) throw new Error('the transition table has no recipient_gone rule');
  const from = rule.from.filter((s): s is DeliveryState => s !== null);
  const to = rule.to;
  const work = workMoveWhenDeliverySettles(to);
  const reason = `the recipient ${handle} was removed`;
  return {
    from,
    liveTurnStates: LIVE_TURN_STATES,
    to,
    detail: `${reason}; not redirected`,
    event: { event: 'recipient_gone', actorKind: 'system', actorId: null, tokenId, reason },
    work: work ? { from: work.from, to: work.to, event: work.event } : null,
  };
}
