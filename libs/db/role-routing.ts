import { prepared, type Queryable } from './prepared.ts';
import type { HandoffRecord, ProviderName } from './records.ts';
import { BIND_ROLE_SQL, IDLE_MEMBERS_SQL, REROUTE_STALE_SQL } from './handoff-sql/role-routing.ts';

/** An idle agent that could take an unbound role handoff now. */
export interface IdleMember {
  agentId: string;
  provider: ProviderName;
  pool: string;
}

/**
 * The statements of routing by role (libs/handoffs/route-by-role.ts; the SQL and its rules are
 * in handoff-sql/role-routing.ts). Each is one statement that also appends its event rows.
 */
export class RoleRouting {
  private members: { at: number; ids: ReadonlySet<string> } | null = null;
  private loading: Promise<ReadonlySet<string>> | null = null;

  /** `membersMaxAgeMs`: how stale `declaresRoles` may be (a cache, not a business timer). */
  constructor(
    private readonly pool: Queryable,
    private readonly membersMaxAgeMs = 1_000,
  ) {}

  /**
   * Whether the agent declares a role, from the set of role-declaring active agents read at most
   * once per `membersMaxAgeMs`: a dispatch run whose queue empties asks it first, so an agent with
   * no role costs no statement. An agent that declared a role just now binds from the next read.
   */
  async declaresRoles(agentId: string): Promise<boolean> {
    const now = performance.now();
    if (this.members && now - this.members.at < this.membersMaxAgeMs) return this.members.ids.has(agentId);
    this.loading ??= prepared<{ id: string }>(this.pool, `SELECT id FROM agents WHERE removed_at IS NULL AND roles <> '{}'`, [])
      .then(({ rows }) => {
        const ids = new Set(rows.map((r) => r.id));
        this.members = { at: performance.now(), ids };
        return ids;
      })
      .finally(() => {
        this.loading = null;
      });
    return (await this.loading).has(agentId);
  }

  /**
   * Binds one unbound role handoff to the agent, if it is an idle active member of that role in
   * `deployment` and one is waiting that its sender may send it; null when none was bound.
   */
  async bind(q: {
    agentId: string;
    deployment: string;
    at: Date;
    restricted: boolean;
  }): Promise<{ handoff: HandoffRecord; eventId: string } | null> {
    const { rows } = await prepared<HandoffRecord & { eventId: string }>(this.pool, BIND_ROLE_SQL, [
      q.agentId,
      q.deployment,
      q.at,
      q.restricted,
    ]);
    const row = rows[0];
    if (!row) return null;
    const { eventId, ...handoff } = row;
    return { handoff, eventId };
  }

  /** Unbinds up to `limit` bindings made before `before` that no turn reached; returns the `rerouted` event ids. */
  async rerouteStale(q: { before: Date; at: Date; limit: number }): Promise<string[]> {
    const { rows } = await prepared<{ id: string }>(this.pool, REROUTE_STALE_SQL, [q.before, q.limit, q.at]);
    return rows.map((r) => r.id);
  }

  /** Idle members of `deployment` for which an unbound role handoff is waiting, at most `limit`. */
  async idleMembers(q: { deployment: string; at: Date; restricted: boolean; limit: number }): Promise<IdleMember[]> {
    const { rows } = await prepared<IdleMember>(this.pool, IDLE_MEMBERS_SQL, [q.deployment, q.at, q.restricted, q.limit]);
    return rows;
  }
}
