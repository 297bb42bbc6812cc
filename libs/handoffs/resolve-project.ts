import { BatonError } from '../domain/errors.ts';
import type { ProjectRecord } from '../db/records.ts';
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
