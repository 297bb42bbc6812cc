import type pg from 'pg';
import { TOKEN_KINDS, type AttemptUsage, type TokenKind, type UsageTotals } from '../domain/turn-usage.ts';
import { USAGE_COLUMNS } from './handoff-sql/build-transition.ts';
import type { AttemptStatus } from './records.ts';

/**
 * The reads of turn accounting: what each attempt's runtime reported (the usage columns the turn
 * end's statement set on `delivery_attempts`), per handoff and summed per agent over a time range.
 * A turn counts once it ended having run: returned, failed or interrupted (`TURN_END_STATUSES`);
 * its wall time is accepted_at to finished_at. Numbers are read as float8: sums of bigints pass
 * 2^53 only past any real use, and JSON has no other number.
 */

/** The attempt statuses of a turn that ran and ended (a busy or refused answer did nothing). */
export const TURN_END_STATUSES: readonly AttemptStatus[] = ['returned', 'failed', 'interrupted'];

/** One attempt's usage as read back, with its number and status. */
export interface AttemptUsageRow extends AttemptUsage {
  readonly number: number;
  readonly status: AttemptStatus;
  readonly acceptedAt: Date | null;
  readonly finishedAt: Date | null;
}

/** One agent's (and model's) totals over a range: the turns it ran as recipient that ended in it. */
export interface AgentUsageRow extends UsageTotals {
  readonly agentId: string;
  readonly agent: string;
  readonly provider: string;
  /** The model the runtime named; null for turns that named none. */
  readonly model: string | null;
}

export interface UsageRange {
  readonly projectId: string;
  /** Only this recipient's turns; absent: every agent of the project. */
  readonly agentId?: string;
  /** Turns that finished at or after `since` and before `until`. */
  readonly since: Date;
  readonly until: Date;
}

const tokenColumn = (kind: TokenKind) => USAGE_COLUMNS[kind];
const timedMs = `(extract(epoch FROM (a.finished_at - a.accepted_at)) * 1000)`;
const ended = TURN_END_STATUSES.map((s) => `'${s}'`).join(', ');

export class UsageRepository {
  constructor(private readonly pool: pg.Pool) {}

  /** Every attempt of a handoff, oldest first, with what its runtime reported (nothing for an attempt that never ran). */
  async ofHandoff(handoffId: string): Promise<AttemptUsageRow[]> {
    const { rows } = await this.pool.query<Record<string, unknown>>(
      `SELECT a.number, a.status::text AS status, a.model, a.accepted_at AS "acceptedAt", a.finished_at AS "finishedAt",
              ${TOKEN_KINDS.map((k) => `${tokenColumn(k)}::float8 AS "${k}"`).join(', ')}, a.cost_usd::float8 AS "costUsd",
              CASE WHEN a.status IN (${ended}) AND a.accepted_at IS NOT NULL AND a.finished_at IS NOT NULL
                   THEN greatest(0, ${timedMs})::float8 END AS "turnMs"
         FROM delivery_attempts a WHERE a.handoff_id = $1 ORDER BY a.number`,
      [handoffId],
    );
    return rows.map((r) => {
      const out: Record<string, unknown> = {
        number: r['number'],
        status: r['status'],
        acceptedAt: r['acceptedAt'],
        finishedAt: r['finishedAt'],
        turnMs: r['turnMs'] ?? null,
      };
      if (r['model'] !== null) out['model'] = r['model'];
      for (const k of [...TOKEN_KINDS, 'costUsd'] as const) if (r[k] !== null) out[k] = r[k];
      return out as unknown as AttemptUsageRow;
    });
  }

  /**
   * Per recipient agent and model, the turns that ended in the range, summed. The handoffs are
   * narrowed first by `updated_at >= since` (a turn's end moves its handoff, and nothing moves
   * `updated_at` back, so no turn that ended in the range is missed) within the project or the
   * agent (their indexes lead with project_id and recipient_id).
   */
  async byAgent(range: UsageRange): Promise<AgentUsageRow[]> {
    const { rows } = await this.pool.query<AgentUsageRow>(
      `SELECT r.id AS "agentId", r.handle AS agent, h.provider::text AS provider, a.model,
              count(*)::int AS turns,
              coalesce(sum(greatest(0, ${timedMs})) FILTER (WHERE a.accepted_at IS NOT NULL), 0)::float8 AS "turnMs",
              ${TOKEN_KINDS.map((k) => `coalesce(sum(a.${tokenColumn(k)}), 0)::float8 AS "${k}"`).join(', ')},
              sum(a.cost_usd)::float8 AS "costUsd"
         FROM handoffs h
         JOIN delivery_attempts a ON a.handoff_id = h.id
         JOIN agents r ON r.id = h.recipient_id
        WHERE h.project_id = $1 AND ($2::uuid IS NULL OR h.recipient_id = $2::uuid) AND h.updated_at >= $3
          AND a.finished_at >= $3 AND a.finished_at < $4 AND a.status IN (${ended})
        GROUP BY r.id, r.handle, h.provider, a.model
        ORDER BY r.handle, a.model NULLS LAST`,
      [range.projectId, range.agentId ?? null, range.since, range.until],
    );
    return rows;
  }
}
