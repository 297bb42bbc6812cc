import type { PrismaClient } from './generated/prisma/client.ts';
import type { AgentRecord, ProjectRecord, ProviderName } from './records.ts';

/** What registration writes: the agent's own fields and the time. */
export type AgentInput = Pick<AgentRecord, 'id' | 'projectId' | 'handle' | 'displayName' | 'provider' | 'providerSettings' | 'deliveryTarget'> & { at: Date };

type AgentRow = {
  id: string;
  projectId: string;
  handle: string;
  displayName: string;
  provider: ProviderName;
  providerSettings: unknown;
  deliveryTarget: string | null;
  generation: number;
  removedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
};

function toRecord(row: AgentRow): AgentRecord {
  const settings = row.providerSettings;
  return {
    ...row,
    providerSettings: typeof settings === 'object' && settings !== null && !Array.isArray(settings) ? (settings as Record<string, unknown>) : {},
  };
}

const DEFAULT_WORKSPACE = 'default';

/** Workspaces, projects and agents, through Prisma (none of this is on the delivery hot path). */
export class AgentRepository {
  constructor(private readonly prisma: PrismaClient) {}

  async findProject(slug: string): Promise<ProjectRecord | null> {
    return this.prisma.project.findFirst({
      where: { slug, workspace: { slug: DEFAULT_WORKSPACE } },
      select: { id: true, workspaceId: true, slug: true, name: true },
    });
  }

  /** Projects of the default workspace, by slug. */
  async listProjects(): Promise<ProjectRecord[]> {
    return this.prisma.project.findMany({
      where: { workspace: { slug: DEFAULT_WORKSPACE } },
      select: { id: true, workspaceId: true, slug: true, name: true },
      orderBy: { slug: 'asc' },
    });
  }

  /** Creates the project in the default workspace; null when the slug is taken (nothing changes). */
  async createProject(id: string, slug: string, name: string): Promise<ProjectRecord | null> {
    const rows = await this.prisma.$queryRaw<ProjectRecord[]>`
      INSERT INTO projects (id, workspace_id, slug, name, created_at)
      SELECT ${id}::uuid, w.id, ${slug}, ${name}, now() FROM workspaces w WHERE w.slug = ${DEFAULT_WORKSPACE}
      ON CONFLICT (workspace_id, slug) DO NOTHING
      RETURNING id, workspace_id AS "workspaceId", slug, name`;
    return rows[0] ?? null;
  }

  /** Creates the project in the default workspace if it is missing; returns it either way. */
  async ensureProject(id: string, slug: string, name: string): Promise<ProjectRecord> {
    const workspace = await this.prisma.workspace.findUnique({ where: { slug: DEFAULT_WORKSPACE } });
    if (!workspace) throw new Error('the default workspace is missing; run `baton db migrate`');
    return this.prisma.project.upsert({
      where: { workspaceId_slug: { workspaceId: workspace.id, slug } },
      create: { id, workspaceId: workspace.id, slug, name },
      update: {},
      select: { id: true, workspaceId: true, slug: true, name: true },
    });
  }

  /** Deletes a project and everything in it (agents, handoffs, their events). */
  async deleteProject(projectId: string): Promise<void> {
    // Handoffs reference agents with ON DELETE RESTRICT, so they go first, in one transaction.
    await this.prisma.$transaction([
      this.prisma.handoff.deleteMany({ where: { projectId } }),
      this.prisma.project.delete({ where: { id: projectId } }),
    ]);
  }

  /**
   * Inserts the agent, or revives a removed one with the same handle under a new generation
   * (so handoffs enrolled for the old one are never redirected to it). Returns null when an
   * active agent already has the handle; nothing changes then. One statement, race-free.
   */
  async insertOrRevive(a: AgentInput): Promise<AgentRecord | null> {
    const rows = await this.prisma.$queryRaw<AgentRow[]>`
      INSERT INTO agents AS a (id, project_id, handle, display_name, provider, provider_settings, delivery_target, created_at, updated_at)
      VALUES (${a.id}::uuid, ${a.projectId}::uuid, ${a.handle}, ${a.displayName}, ${a.provider}::provider,
              ${JSON.stringify(a.providerSettings)}::jsonb, ${a.deliveryTarget}, ${a.at}, ${a.at})
      ON CONFLICT (project_id, handle) DO UPDATE SET
        display_name = EXCLUDED.display_name, provider = EXCLUDED.provider,
        provider_settings = EXCLUDED.provider_settings, delivery_target = EXCLUDED.delivery_target,
        generation = a.generation + 1, removed_at = NULL, updated_at = EXCLUDED.updated_at
      WHERE a.removed_at IS NOT NULL
      RETURNING a.id, a.project_id AS "projectId", a.handle, a.display_name AS "displayName", a.provider::text AS provider,
        a.provider_settings AS "providerSettings", a.delivery_target AS "deliveryTarget", a.generation,
        a.removed_at AS "removedAt", a.created_at AS "createdAt", a.updated_at AS "updatedAt"`;
    const row = rows[0];
    return row ? toRecord(row) : null;
  }

  async findActive(projectId: string, handle: string): Promise<AgentRecord | null> {
    const row = await this.prisma.agent.findFirst({ where: { projectId, handle, removedAt: null } });
    return row ? toRecord(row) : null;
  }

  /** Active agents of the project with any of the handles. */
  async findActiveByHandles(projectId: string, handles: readonly string[]): Promise<AgentRecord[]> {
    const rows = await this.prisma.agent.findMany({ where: { projectId, handle: { in: [...handles] }, removedAt: null } });
    return rows.map(toRecord);
  }

  async findById(id: string): Promise<AgentRecord | null> {
    const row = await this.prisma.agent.findUnique({ where: { id } });
    return row ? toRecord(row) : null;
  }

  async listActive(projectId: string): Promise<AgentRecord[]> {
    const rows = await this.prisma.agent.findMany({ where: { projectId, removedAt: null }, orderBy: { handle: 'asc' } });
    return rows.map(toRecord);
  }

  /** Soft-removes the agent; returns false when no active agent had the handle. */
  async remove(projectId: string, handle: string, at: Date): Promise<boolean> {
    const { count } = await this.prisma.agent.updateMany({
      where: { projectId, handle, removedAt: null },
      data: { removedAt: at, updatedAt: at },
    });
    return count > 0;
  }
}
