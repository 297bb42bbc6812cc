import { BatonError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import type { ProjectRecord } from '../db/records.ts';
import type { CoreDeps } from './ports.ts';

/**
 * Creates a project: a scope of its own for agents, handoffs, sessions, facts and tokens.
 * @throws BatonError project_exists
 */
export async function createProject(
  deps: Pick<CoreDeps, 'agents' | 'clock' | 'logger'>,
  input: { slug: string; name?: string | undefined },
): Promise<ProjectRecord> {
  const slug = input.slug.toLowerCase();
  const at = deps.clock.now();
  const project = await deps.agents.createProject(newId(at.getTime()), slug, input.name ?? slug);
  if (!project) throw new BatonError('project_exists', `project ${JSON.stringify(slug)} already exists`);
  deps.logger.info({ projectId: project.id, project: slug }, 'project created');
  return project;
}

export function listProjects(deps: Pick<CoreDeps, 'agents'>): Promise<ProjectRecord[]> {
  return deps.agents.listProjects();
}
