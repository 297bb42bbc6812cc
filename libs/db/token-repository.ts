import type pg from 'pg';
import { prepared, type Queryable } from './prepared.ts';

export interface TokenRecord {
  id: string;
  name: string;
  isAdmin: boolean;
  projectId: string | null;
  projectSlug: string | null;
  agentId: string | null;
  agentHandle: string | null;
  /** The generation of the agent the token was issued to (null for an admin token). */
  agentGeneration: number | null;
  /**
   * The agent the token was issued to is gone: removed, or removed and registered again (a
   * newer generation). Such a token is refused like a revoked one, whatever `revokedAt` says.
   */
  agentRemoved: boolean;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

const SELECT = `
  SELECT t.id, t.name, t.is_admin AS "isAdmin", t.project_id AS "projectId", p.slug AS "projectSlug",
    t.agent_id AS "agentId", a.handle AS "agentHandle", t.agent_generation AS "agentGeneration",
    (t.agent_id IS NOT NULL AND (a.removed_at IS NOT NULL OR a.generation IS DISTINCT FROM t.agent_generation)) AS "agentRemoved",
    t.created_at AS "createdAt", t.last_used_at AS "lastUsedAt", t.revoked_at AS "revokedAt"
  FROM agent_tokens t LEFT JOIN projects p ON p.id = t.project_id LEFT JOIN agents a ON a.id = t.agent_id`;

/**
 * Bearer tokens. Only a sha256 of each secret is stored; the lookup is one indexed, prepared
 * statement because every authenticated request makes it (no cache: a revoked token is
 * refused from the next request on).
 */
export class TokenRepository {
  constructor(private readonly pool: Queryable) {}

  private q<T extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<T>> {
    return prepared<T>(this.pool, text, values);
  }

  async create(t: {
    id: string;
    name: string;
    secretHash: string;
    isAdmin: boolean;
    projectId: string | null;
    agentId: string | null;
    agentGeneration: number | null;
    at: Date;
  }): Promise<TokenRecord> {
    await this.q(
      `INSERT INTO agent_tokens (id, name, secret_hash, is_admin, project_id, agent_id, agent_generation, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [t.id, t.name, t.secretHash, t.isAdmin, t.projectId, t.agentId, t.agentGeneration, t.at],
    );
    return (await this.find(t.id))!;
  }

  async findBySecretHash(secretHash: string): Promise<TokenRecord | null> {
    const { rows } = await this.q<TokenRecord>(`${SELECT} WHERE t.secret_hash = $1`, [secretHash]);
    return rows[0] ?? null;
  }

  /** Tokens of a project (null: every token), oldest first. */
  async list(projectId: string | null): Promise<TokenRecord[]> {
    const { rows } = await this.q<TokenRecord>(`${SELECT} WHERE $1::uuid IS NULL OR t.project_id = $1 ORDER BY t.created_at, t.id`, [
      projectId,
    ]);
    return rows;
  }

  async find(id: string): Promise<TokenRecord | null> {
    const { rows } = await this.q<TokenRecord>(`${SELECT} WHERE t.id = $1`, [id]);
    return rows[0] ?? null;
  }

  /** Revokes the token; false when it does not exist or was revoked already. */
  async revoke(id: string, at: Date): Promise<boolean> {
    const { rowCount } = await this.q(`UPDATE agent_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, [id, at]);
    return (rowCount ?? 0) > 0;
  }

  /** Records that the token was used (callers throttle this; it is not on every request). */
  async touch(id: string, at: Date): Promise<void> {
    await this.q(`UPDATE agent_tokens SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)`, [id, at]);
  }

  async anyAdmin(): Promise<boolean> {
    const { rows } = await this.q<{ any: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM agent_tokens WHERE is_admin AND revoked_at IS NULL) AS any`,
      [],
    );
    return rows[0]!.any;
  }
}
