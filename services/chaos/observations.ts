import type pg from 'pg';
import type { DemoWrite } from '../../libs/adapters/demo/demo-agent-host.ts';
import { DemoHostClient } from '../../libs/adapters/demo/demo-host-client.ts';
import type { AttemptRow, EventRow, HandoffRow, NotBeforeRow } from './invariants.ts';

/** What the invariants are checked against, read once the run is over. */
export interface Observations {
  readonly writes: DemoWrite[];
  readonly handoffs: HandoffRow[];
  readonly attempts: AttemptRow[];
  readonly events: EventRow[];
  readonly notBefore: NotBeforeRow[];
}

const ms = (d: Date | null) => (d === null ? null : d.getTime());

/**
 * Reads the demo host's write log (every write attempt any worker made, in arrival order) and,
 * straight from Postgres, every handoff, attempt and event of the run, and the `not_before`
 * history the run's trigger kept.
 */
export async function collectObservations(pool: pg.Pool, demoHostUrl: string): Promise<Observations> {
  const demo = new DemoHostClient(demoHostUrl);
  try {
    const [writes, handoffs, attempts, events, notBefore] = await Promise.all([
      demo.writes(),
      pool.query<{ id: string; seq: string; recipient: string | null; provider: string | null; state: HandoffRow['state'] }>(
        `SELECT h.id, h.seq::text AS seq, a.handle AS recipient, h.provider::text AS provider, h.delivery_state AS state
         FROM handoffs h LEFT JOIN agents a ON a.id = h.recipient_id ORDER BY h.seq`,
      ),
      pool.query<{ handoffId: string; requestId: string; startedAt: Date; status: string }>(
        'SELECT handoff_id AS "handoffId", request_id AS "requestId", started_at AS "startedAt", status::text AS status FROM delivery_attempts',
      ),
      pool.query<{ id: string; handoffId: string; to: EventRow['to']; event: string; actor: string | null; workFrom: string | null; workTo: string | null; at: Date }>(
        `SELECT id::text AS id, handoff_id AS "handoffId", to_state AS "to", event, actor_id AS actor,
           work_from_state::text AS "workFrom", work_to_state::text AS "workTo", created_at AS at
         FROM handoff_events e ORDER BY e.id`,
      ),
      pool.query<{ handoffId: string; notBefore: Date | null; at: Date }>('SELECT handoff_id AS "handoffId", not_before AS "notBefore", at FROM chaos.not_before_log'),
    ]);
    return {
      writes,
      handoffs: handoffs.rows.map((r) => ({ ...r, seq: Number(r.seq) })),
      attempts: attempts.rows.map((r) => ({ handoffId: r.handoffId, requestId: r.requestId, reservedAt: r.startedAt.getTime(), status: r.status })),
      events: events.rows.map((r) => ({ ...r, id: Number(r.id), at: r.at.getTime() })),
      notBefore: notBefore.rows.map((r) => ({ handoffId: r.handoffId, notBefore: ms(r.notBefore), at: r.at.getTime() })),
    };
  } finally {
    demo.close();
  }
}

/** Handoffs not yet settled, and all handoffs, right now (the run polls this until all are final). */
export async function openCount(pool: pg.Pool, settled: readonly string[]): Promise<{ open: number; total: number } | null> {
  try {
    const { rows } = await pool.query<{ open: number; total: number }>(
      'SELECT count(*) FILTER (WHERE NOT (delivery_state::text = ANY($1::text[])))::int AS open, count(*)::int AS total FROM handoffs',
      [settled],
    );
    return rows[0] ?? null;
  } catch {
    return null;
  }
}
