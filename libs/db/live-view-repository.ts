import type { DeliveryState } from '../domain/delivery-states.ts';
import type { Viewer } from '../domain/visibility.ts';
import { prepared, type Queryable } from './prepared.ts';
import { visibleSql } from './visible-sql.ts';

/** Visible open handoffs to one recipient, by delivery state, with how many are past their due time. */
export interface RecipientLoad {
  readonly recipientId: string;
  readonly state: DeliveryState;
  readonly count: number;
  readonly overdue: number;
}

/** One percentile pair over the handoffs measured, in milliseconds (null when none was). */
export interface DeliveryTimeFigures {
  readonly count: number;
  readonly p50Ms: number | null;
  readonly p90Ms: number | null;
}

/**
 * The reads behind the live page (`GET /v1/live`), each through the one visibility rule
 * (visible-sql.ts), so the page shows what its caller may see and nothing else. Reads only;
 * bounded by the (recipient_id, delivery_state, seq), (project_id, seq) and
 * (handoff_id, id) indexes.
 */
export class LiveViewRepository {
  constructor(private readonly pool: Queryable) {}

  /** Open (unsettled) handoffs the viewer may see, grouped by recipient and delivery state. */
  async recipientLoad(projectId: string, openStates: readonly DeliveryState[], now: Date, viewer: Viewer): Promise<RecipientLoad[]> {
    const params: unknown[] = [projectId, openStates, now];
    const { rows } = await prepared<{ recipient_id: string; state: DeliveryState; n: number; overdue: number }>(this.pool,
      `SELECT h.recipient_id, h.delivery_state AS state, count(*)::int AS n, count(*) FILTER (WHERE h.due_at < $3)::int AS overdue
         FROM handoffs h
        WHERE h.project_id = $1 AND h.recipient_id IS NOT NULL AND h.delivery_state = ANY($2::delivery_state[]) AND ${visibleSql(viewer, params)}
        GROUP BY 1, 2`,
      params,
    );
    return rows.map((r) => ({ recipientId: r.recipient_id, state: r.state, count: r.n, overdue: r.overdue }));
  }

  /**
   * Send → first ACCEPTED and send → first RETURNED, p50 and p90, over the newest `limit`
   * visible handoffs sent since `since` (the ones not there yet do not count).
   */
  async deliveryTimes(projectId: string, since: Date, limit: number, viewer: Viewer): Promise<{ accepted: DeliveryTimeFigures; returned: DeliveryTimeFigures }> {
    const params: unknown[] = [projectId, since, limit];
    const { rows } = await prepared<{ an: number; a50: number | null; a90: number | null; rn: number; r50: number | null; r90: number | null }>(this.pool,
      `WITH recent AS (
         SELECT h.id, h.created_at FROM handoffs h
          WHERE h.project_id = $1 AND h.created_at >= $2 AND ${visibleSql(viewer, params)}
          ORDER BY h.seq DESC LIMIT $3
       ), times AS (
         SELECT extract(epoch FROM (a.at - r.created_at)) * 1000 AS accepted_ms,
                extract(epoch FROM (t.at - r.created_at)) * 1000 AS returned_ms
           FROM recent r
           LEFT JOIN LATERAL (SELECT min(e.created_at) AS at FROM handoff_events e WHERE e.handoff_id = r.id AND e.to_state = 'ACCEPTED') a ON true
           LEFT JOIN LATERAL (SELECT min(e.created_at) AS at FROM handoff_events e WHERE e.handoff_id = r.id AND e.to_state = 'RETURNED' AND e.from_state <> 'RETURNED') t ON true
       )
       SELECT count(accepted_ms)::int AS an,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY accepted_ms) AS a50,
              percentile_cont(0.9) WITHIN GROUP (ORDER BY accepted_ms) AS a90,
              count(returned_ms)::int AS rn,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY returned_ms) AS r50,
              percentile_cont(0.9) WITHIN GROUP (ORDER BY returned_ms) AS r90
         FROM times`,
      params,
    );
    const r = rows[0];
    const ms = (v: number | null | undefined) => (v === null || v === undefined ? null : Math.max(0, Math.round(Number(v))));
    return {
      accepted: { count: r?.an ?? 0, p50Ms: ms(r?.a50), p90Ms: ms(r?.a90) },
      returned: { count: r?.rn ?? 0, p50Ms: ms(r?.r50), p90Ms: ms(r?.r90) },
    };
  }

  /** The newest event id of the log (0 when empty): where the page's event stream resumes. */
  async lastEventId(): Promise<bigint> {
    const { rows } = await prepared<{ id: string | null }>(this.pool, 'SELECT max(id)::text AS id FROM handoff_events', []);
    return BigInt(rows[0]?.id ?? '0');
  }
}
