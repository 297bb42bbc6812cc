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

/** One minute of the live page's chart: what settled in it, by outcome, and send → returned of what returned in it. */
export interface MinuteFigures {
  /** The minute's first instant. */
  readonly at: Date;
  /** Handoffs whose delivery settled in this minute, by the state they settled in (absent: none). */
  readonly settled: Partial<Record<DeliveryState, number>>;
  /** Send → first RETURNED of the handoffs that returned in this minute. */
  readonly returned: DeliveryTimeFigures;
}

/** The chart's minutes, and whether its sample was full (older handoffs may then be missing). */
export interface MinuteChart {
  readonly minutes: MinuteFigures[];
  /** True when the newest `limit` handoffs were all read: what settled among older ones is not counted. */
  readonly sampleFull: boolean;
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
    const { rows } = await prepared<{ recipient_id: string; state: DeliveryState; n: number; overdue: number }>(
      this.pool,
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
  async deliveryTimes(
    projectId: string,
    since: Date,
    limit: number,
    viewer: Viewer,
  ): Promise<{ accepted: DeliveryTimeFigures; returned: DeliveryTimeFigures }> {
    const params: unknown[] = [projectId, since, limit];
    const { rows } = await prepared<{
      an: number;
      a50: number | null;
      a90: number | null;
      rn: number;
      r50: number | null;
      r90: number | null;
    }>(
      this.pool,
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

  /**
   * The chart of the last `minutes` minutes (the current one last), among the newest `limit`
   * visible handoffs of the project: per minute, how many settled, by outcome, and send → first
   * RETURNED p50/p90 of those that returned in it. Every minute is listed, empty ones too.
   */
  async perMinute(projectId: string, now: Date, minutes: number, limit: number, viewer: Viewer): Promise<MinuteChart> {
    const lastMinute = Math.floor(now.getTime() / 60_000);
    const firstMinute = lastMinute - minutes + 1;
    const params: unknown[] = [projectId, new Date(firstMinute * 60_000), limit];
    const { rows } = await prepared<{
      kind: 'settled' | 'returned' | 'sample';
      minute: string | null;
      state: DeliveryState | null;
      n: number;
      p50: number | null;
      p90: number | null;
    }>(
      this.pool,
      `WITH recent AS (
         SELECT h.id, h.created_at, h.delivery_state, h.settled_at FROM handoffs h
          WHERE h.project_id = $1 AND ${visibleSql(viewer, params)}
          ORDER BY h.seq DESC LIMIT $3
       ), returned AS (
         SELECT floor(extract(epoch FROM t.at) / 60)::bigint AS minute, extract(epoch FROM (t.at - r.created_at)) * 1000 AS ms
           FROM recent r
           JOIN LATERAL (SELECT min(e.created_at) AS at FROM handoff_events e WHERE e.handoff_id = r.id AND e.to_state = 'RETURNED' AND e.from_state <> 'RETURNED') t ON t.at >= $2
       )
       SELECT 'settled' AS kind, floor(extract(epoch FROM settled_at) / 60)::bigint::text AS minute, delivery_state AS state, count(*)::int AS n, NULL::float8 AS p50, NULL::float8 AS p90
         FROM recent WHERE settled_at >= $2 GROUP BY 2, 3
       UNION ALL
       SELECT 'returned', minute::text, NULL, count(*)::int, percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), percentile_cont(0.9) WITHIN GROUP (ORDER BY ms)
         FROM returned GROUP BY minute
       UNION ALL
       SELECT 'sample', NULL, NULL, count(*)::int, NULL, NULL FROM recent`,
      params,
    );
    const ms = (v: number | null) => (v === null ? null : Math.max(0, Math.round(Number(v))));
    const out = Array.from({ length: minutes }, (_, i) => ({
      at: new Date((firstMinute + i) * 60_000),
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- the assertions type the slots Array.from infers
      settled: {} as Partial<Record<DeliveryState, number>>,
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- as above
      returned: { count: 0, p50Ms: null, p90Ms: null } as DeliveryTimeFigures,
    }));
    let sampleFull = false;
    for (const r of rows) {
      if (r.kind === 'sample') {
        sampleFull = r.n >= limit;
        continue;
      }
      const slot = out[Number(r.minute) - firstMinute];
      // A clock a little behind the database's may put a row in a minute after `now`: left out.
      if (!slot) continue;
      if (r.kind === 'settled' && r.state !== null) slot.settled[r.state] = r.n;
      else if (r.kind === 'returned') slot.returned = { count: r.n, p50Ms: ms(r.p50), p90Ms: ms(r.p90) };
    }
    return { minutes: out, sampleFull };
  }

  /** The newest event id of the log (0 when empty): where the page's event stream resumes. */
  async lastEventId(): Promise<bigint> {
    const { rows } = await prepared<{ id: string | null }>(this.pool, 'SELECT max(id)::text AS id FROM handoff_events', []);
    return BigInt(rows[0]?.id ?? '0');
  }
}
