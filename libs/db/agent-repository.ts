import { Prisma, type PrismaClient } from './generated/prisma/client.ts';
import type { DeliveryState } from '../domain/delivery-states.ts';
import type { ActorKind } from '../domain/transitions.ts';
import type { WorkState } from '../domain/work-states.ts';
import type { AgentRecord, ProjectRecord, ProviderName } from './records.ts';

/** What registration writes: the agent's own fields and the time. */
export type AgentInput = Pick<
  AgentRecord,
  'id' | 'projectId' | 'handle' | 'displayName' | 'provider' | 'providerSettings' | 'deliveryTarget' | 'pool' | 'deployment' | 'roles'
> & { at: Date };

type AgentRow = {
  id: string;
  projectId: string;
  handle: string;
  displayName: string;
  provider: ProviderName;
  providerSettings: unknown;
  deliveryTarget: string | null;
  generation: number;
  pool: string;
  deployment: string;
  roles: string[];
  removedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
};

function toRecord(row: AgentRow): AgentRecord {
  const settings = row.providerSettings;
  // Named fields only: a row from Prisma also carries columns (the bigint turn fence) that no
  // caller of an AgentRecord needs and that JSON cannot hold.
  return {
    id: row.id,
    projectId: row.projectId,
    handle: row.handle,
    displayName: row.displayName,
    provider: row.provider,
    providerSettings:
      typeof settings === 'object' && settings !== null && !Array.isArray(settings) ? (settings as Record<string, unknown>) : {},
    deliveryTarget: row.deliveryTarget,
    generation: row.generation,
    pool: row.pool,
    deployment: row.deployment,
    roles: row.roles,
    removedAt: row.removedAt,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

const DEFAULT_WORKSPACE = 'default';

/** The columns of an AgentRow, as a RETURNING list over the alias `a`. */
const AGENT_COLUMNS = Prisma.sql`a.id, a.project_id AS "projectId", a.handle, a.display_name AS "displayName", a.provider::text AS provider,
        a.provider_settings AS "providerSettings", a.delivery_target AS "deliveryTarget", a.generation, a.pool, a.deployment, a.roles,
        a.removed_at AS "removedAt", a.created_at AS "createdAt", a.updated_at AS "updatedAt"`;

/**
 * How a removal settles the agent's handoffs that no turn can reach any more, planned by the
 * caller with the delivery and work tables: every handoff to the agent in one of `from` (a live
 * turn state only while no turn was ever written to it, i.e. a pull claim) moves to `to`, and
 * its work, when it is in one of `work.from`, to `work.to`; each move gets its event row.
 */
export interface RemovalSettlement {
  from: readonly DeliveryState[];
  liveTurnStates: readonly DeliveryState[];
  to: DeliveryState;
  detail: string;
  event: { event: string; actorKind: ActorKind; actorId: string | null; tokenId: string | null; reason: string };
  work: { from: readonly WorkState[]; to: WorkState; event: string } | null;
}

/**
 * A handoff bound to the removed agent by its role that no turn reached: routed again (its
 * role, unbound, WAITING: `rerouted`) instead of settled. `h` is the handoff.
 */
const REROUTABLE_ON_REMOVAL = Prisma.raw(`h.recipient_role IS NOT NULL AND h.delivery_state IN ('WAITING', 'BUSY', 'HELD', 'OWNER_REJECTED')
          AND NOT EXISTS (SELECT 1 FROM delivery_attempts t WHERE t.handoff_id = h.id AND t.accepted_at IS NOT NULL)`);

/** The removal's CTEs that settle the handoffs, or route them again (`gone` is the removed agent). */
function settlementSql(s: RemovalSettlement, at: Date): Prisma.Sql {
  const workFrom = s.work?.from ?? [];
  const workTo = s.work?.to ?? null;
  const e = s.event;
  // `b` is the row as the statement found it (the event's from-states); a row another writer
  // moved meanwhile fails `b.revision = h.revision` and is left to that writer.
  return Prisma.sql`, settled AS (
        UPDATE handoffs h SET delivery_state = ${s.to}::delivery_state, revision = h.revision + 1, updated_at = ${at},
          settled_at = ${at}, in_progress_key = NULL, delivery_detail = ${s.detail},
          work_state = CASE WHEN h.work_state = ANY(${workFrom}::work_state[]) THEN ${workTo}::work_state ELSE h.work_state END,
          work_revision = CASE WHEN h.work_state = ANY(${workFrom}::work_state[]) THEN h.work_revision + 1 ELSE h.work_revision END,
          claim_token = NULL, lease_expires_at = NULL
        FROM gone, handoffs b
        WHERE h.recipient_id = gone.id AND b.id = h.id AND b.revision = h.revision
          AND h.delivery_state = ANY(${s.from}::delivery_state[])
          AND (h.attempt_count = 0 OR NOT h.delivery_state = ANY(${s.liveTurnStates}::delivery_state[]))
          AND NOT (${REROUTABLE_ON_REMOVAL})
        RETURNING h.id, b.delivery_state AS from_state, b.work_state AS work_from, h.work_state AS work_to, h.revision
      ), rerouted AS (
        UPDATE handoffs h SET recipient_id = NULL, recipient_generation = NULL, provider = NULL, pool = '', delivery_target = NULL,
          routed_at = NULL, delivery_state = 'WAITING', not_before = NULL, refusals = 0, revision = h.revision + 1, updated_at = ${at},
          delivery_detail = 'waiting for an agent with role ' || h.recipient_role
        FROM gone, handoffs b
        WHERE h.recipient_id = gone.id AND b.id = h.id AND b.revision = h.revision AND ${REROUTABLE_ON_REMOVAL}
        RETURNING h.id, b.delivery_state AS from_state, h.revision, h.recipient_role
      ), rerouted_events AS (
        INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, token_id, reason, detail, revision, created_at)
        SELECT id, from_state, 'WAITING'::delivery_state, 'rerouted', ${e.actorKind}::actor_kind, ${e.actorId}, ${e.tokenId}::uuid,
          ${`${e.reason}; no turn was written: routed again`}, jsonb_build_object('role', recipient_role, 'why', 'removed'), revision, ${at}::timestamptz
        FROM rerouted
        RETURNING id
      ), settled_events AS (
        INSERT INTO handoff_events (handoff_id, from_state, to_state, work_from_state, work_to_state, event, actor_kind, actor_id, token_id, reason, revision, created_at)
        SELECT id, from_state, ${s.to}::delivery_state, NULL::work_state, NULL::work_state, ${e.event}, ${e.actorKind}::actor_kind, ${e.actorId}, ${e.tokenId}::uuid, ${e.reason}, revision, ${at}::timestamptz FROM settled
        UNION ALL
        SELECT id, ${s.to}::delivery_state, ${s.to}::delivery_state, work_from, work_to, ${s.work?.event ?? null}, ${e.actorKind}::actor_kind, ${e.actorId}, ${e.tokenId}::uuid, ${e.reason}, revision, ${at}::timestamptz
        FROM settled WHERE work_from = ANY(${workFrom}::work_state[])
        RETURNING id
      )`;
}

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
   * (so handoffs enrolled for the old one are never redirected to it, and tokens issued to it,
   * bound to its generation, stay refused). Either way the agent belongs to `a.deployment` from
   * then on. Returns null when an active agent already has the handle; nothing changes then.
   * One statement, race-free.
   */
  async insertOrRevive(a: AgentInput): Promise<AgentRecord | null> {
    const rows = await this.prisma.$queryRaw<AgentRow[]>`
      INSERT INTO agents AS a (id, project_id, handle, display_name, provider, provider_settings, delivery_target, pool, deployment, roles, created_at, updated_at)
      VALUES (${a.id}::uuid, ${a.projectId}::uuid, ${a.handle}, ${a.displayName}, ${a.provider}::provider,
              ${JSON.stringify(a.providerSettings)}::jsonb, ${a.deliveryTarget}, ${a.pool}, ${a.deployment}, ${a.roles}::text[], ${a.at}, ${a.at})
      ON CONFLICT (project_id, handle) DO UPDATE SET
        display_name = EXCLUDED.display_name, provider = EXCLUDED.provider,
        provider_settings = EXCLUDED.provider_settings, delivery_target = EXCLUDED.delivery_target, pool = EXCLUDED.pool,
        deployment = EXCLUDED.deployment, roles = EXCLUDED.roles, generation = a.generation + 1, removed_at = NULL, updated_at = EXCLUDED.updated_at
      WHERE a.removed_at IS NOT NULL
      RETURNING ${AGENT_COLUMNS}`;
    const row = rows[0];
    return row ? toRecord(row) : null;
  }

  /**
   * Replaces the roles of the active agent with the handle (already checked by checkRoles) and
   * bumps its updated_at; its generation stays (roles change where work may be routed, not
   * where turns are delivered). Null when no active agent has the handle; nothing changes then.
   */
  async setRoles(projectId: string, handle: string, roles: readonly string[], at: Date): Promise<AgentRecord | null> {
    const rows = await this.prisma.$queryRaw<AgentRow[]>`
      UPDATE agents AS a SET roles = ${[...roles]}::text[], updated_at = ${at}
      WHERE a.project_id = ${projectId}::uuid AND a.handle = ${handle} AND a.removed_at IS NULL
      RETURNING ${AGENT_COLUMNS}`;
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

  /** Active push agents (not manual) per owning deployment, over every project: who delivers to how many. */
  async countPushAgentsByDeployment(): Promise<Array<{ deployment: string; agents: number }>> {
    const rows = await this.prisma.$queryRaw<Array<{ deployment: string; agents: number }>>`
      SELECT deployment, count(*)::int AS agents FROM agents
      WHERE removed_at IS NULL AND provider <> 'manual'::provider GROUP BY deployment ORDER BY deployment`;
    return rows;
  }

  /**
   * Active agents of a deployment with one of the providers and pools, over every project: the
   * agents a worker serves (read at its start to prepare their runtimes), oldest first.
   */
  async listServed(deployment: string, providers: readonly ProviderName[], pools: readonly string[]): Promise<AgentRecord[]> {
    const rows = await this.prisma.agent.findMany({
      where: { deployment, provider: { in: [...providers] }, pool: { in: [...pools] }, removedAt: null },
      orderBy: { createdAt: 'asc' },
    });
    return rows.map(toRecord);
  }

  async listActive(projectId: string): Promise<AgentRecord[]> {
    const rows = await this.prisma.agent.findMany({ where: { projectId, removedAt: null }, orderBy: { handle: 'asc' } });
    return rows.map(toRecord);
  }

  /**
   * Soft-removes the agent and, in the same statement, revokes its live tokens: a removal ends
   * them for good (they are also bound to this generation, so reviving the handle cannot bring
   * them back). With `settle`, the same statement also settles the agent's handoffs no turn can
   * reach any more (RemovalSettlement). Returns the ids of the event rows it appended, or null
   * when no active agent had the handle; nothing changes then.
   */
  async remove(projectId: string, handle: string, at: Date, settle?: RemovalSettlement): Promise<{ eventIds: string[] } | null> {
    const rows = await this.prisma.$queryRaw<Array<{ id: string; eventIds: string[] }>>`
      WITH gone AS (
        UPDATE agents SET removed_at = ${at}, updated_at = ${at}
        WHERE project_id = ${projectId}::uuid AND handle = ${handle} AND removed_at IS NULL
        RETURNING id
      ), revoked AS (
        UPDATE agent_tokens t SET revoked_at = ${at} FROM gone WHERE t.agent_id = gone.id AND t.revoked_at IS NULL
      )${settle ? settlementSql(settle, at) : Prisma.empty}
      SELECT id, ${settle ? Prisma.sql`ARRAY(SELECT s.id::text FROM (SELECT id FROM settled_events UNION ALL SELECT id FROM rerouted_events) s ORDER BY s.id)` : Prisma.sql`ARRAY[]::text[]`} AS "eventIds" FROM gone`;
    const row = rows[0];
    return row ? { eventIds: row.eventIds } : null;
  }
}
