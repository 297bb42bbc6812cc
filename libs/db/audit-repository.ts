import { prepared, type Queryable } from './prepared.ts';

export interface AuditWrite {
  tokenId: string;
  project: string | null;
  method: string;
  route: string;
  params: Record<string, unknown>;
  status: number;
  at: Date;
}

export interface AuditRecord extends AuditWrite {
  id: bigint;
}

/** Who changed what outside a handoff's own event log, one row per mutating request. */
export class AuditRepository {
  constructor(private readonly pool: Queryable) {}

  async record(a: AuditWrite): Promise<void> {
    await prepared(
      this.pool,
      `INSERT INTO audit_events (token_id, project, method, route, params, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [a.tokenId, a.project, a.method, a.route, JSON.stringify(a.params), a.status, a.at],
    );
  }

  /** Newest first; optionally only one token's. */
  async list(tokenId: string | null, limit: number): Promise<AuditRecord[]> {
    const { rows } = await prepared<AuditRecord>(
      this.pool,
      `SELECT id, token_id AS "tokenId", project, method, route, params, status, created_at AS "at"
       FROM audit_events WHERE $1::uuid IS NULL OR token_id = $1 ORDER BY id DESC LIMIT $2`,
      [tokenId, limit],
    );
    return rows;
  }
}
