import { BatonError } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import { canSee, type Viewer } from '../domain/visibility.ts';
import type { AgentRecord, HandoffView } from '../db/records.ts';
import type { HandoffRepository } from '../db/handoff-repository.ts';
import type { CoreDeps } from './ports.ts';
import { resolveProject } from './resolve-project.ts';

/** What reading a handoff again reads: its view. */
export interface RereadDeps {
  readonly handoffs: Pick<HandoffRepository, 'findView'>;
}

/** What loading a handoff for a caller reads: the project and agents, and the handoff's view. */
export type LoadDeps = Pick<CoreDeps, 'agents'> & RereadDeps;

/**
 * The handoff `id` of the project, if the viewer may see it. One it may not see is reported
 * exactly like one that does not exist (same code, same message), so nothing confirms it.
 * @throws BatonError project_not_found, handoff_not_found
 */
export async function loadVisible(deps: LoadDeps, projectSlug: string, id: string, viewer: Viewer): Promise<HandoffView> {
  const project = await resolveProject(deps, projectSlug);
  const h = isUuid(id) ? await deps.handoffs.findView(project.id, id) : null;
  if (!h || !canSee(h, viewer)) throw new BatonError('handoff_not_found', `no handoff ${JSON.stringify(id)} in project ${project.slug}`);
  return h;
}

/**
 * The handoff and the agent acting on it, both in the project; the handoff as that agent (and
 * the caller's token) may see it.
 * @throws BatonError project_not_found, agent_not_found, handoff_not_found
 */
export async function loadAsAgent(
  deps: LoadDeps,
  input: { project: string; id: string; as: string; tokenId?: string | null | undefined },
): Promise<{ h: HandoffView; agent: AgentRecord }> {
  const project = await resolveProject(deps, input.project);
  const [h, agent] = await Promise.all([
    isUuid(input.id) ? deps.handoffs.findView(project.id, input.id) : null,
    deps.agents.findActive(project.id, input.as.toLowerCase()),
  ]);
  if (!agent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(input.as)} in project ${project.slug}`);
  if (!h || !canSee(h, { agentId: agent.id, tokenId: input.tokenId ?? null, allOwners: false })) {
    throw new BatonError('handoff_not_found', `no handoff ${JSON.stringify(input.id)} in project ${project.slug}`);
  }
  return { h, agent };
}

/** The handoff as it is now, after a move. */
export async function reread(deps: RereadDeps, h: HandoffView): Promise<HandoffView> {
  const again = await deps.handoffs.findView(h.projectId, h.id);
  if (!again) throw new BatonError('handoff_not_found', `handoff ${h.id} disappeared`);
  return again;
}
