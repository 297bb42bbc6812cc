import type { FastifyRequest } from 'fastify';
import type { CoreDeps } from '../../libs/handoffs/ports.ts';

/** What every /v1 route plugin is given. */
export interface RouteOptions {
  readonly core: CoreDeps;
  readonly defaultProject: string;
}

/** The project a request acts in: the X-Baton-Project header, or the configured default. */
export function projectOf(request: FastifyRequest, defaultProject: string): string {
  const header = request.headers['x-baton-project'];
  return typeof header === 'string' && header !== '' ? header.toLowerCase() : defaultProject;
}
