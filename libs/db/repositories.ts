import { AgentRepository } from './agent-repository.ts';
import { HandoffRepository } from './handoff-repository.ts';
import type { Database } from './open-database.ts';

export interface Repositories {
  readonly handoffs: HandoffRepository;
  readonly agents: AgentRepository;
}

export function createRepositories(db: Database): Repositories {
  return { handoffs: new HandoffRepository(db.pool), agents: new AgentRepository(db.prisma) };
}
