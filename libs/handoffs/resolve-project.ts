import { BatonError } from '../domain/errors.ts';
import type { AgentRecord, ProjectRecord } from '../db/records.ts';
import type { CoreDeps } from './ports.ts';

/**
 * The project a call acts in.
 * @throws BatonError project_not_found
 */
export async function resolveProject(deps: Pick<CoreDeps, 'agents'>, slug: string): Promise<ProjectRecord> {
  const project = await deps.agents.findProject(slug.toLowerCase());
  if (!project) throw new BatonError('project_not_found', `project ${JSON.stringify(slug)} does not exist`);
  return project;
}

/**
 * The active agents of the project with these handles (case-insensitive), in one query; a
 * missing handle maps to undefined and the caller says which error that is.
 */
export async function findAgents<const H extends readonly string[]>(
  deps: Pick<CoreDeps, 'agents'>,
  project: ProjectRecord,
  handles: H,
): Promise<{ [K in keyof H]: AgentRecord | undefined }> {
  const lower = handles.map((h) => h.toLowerCase());
  const found = await deps.agents.findActiveByHandles(project.id, lower);
  return lower.map((h) => found.find((a) => a.handle === h)) as { [K in keyof H]: AgentRecord | undefined };
}
