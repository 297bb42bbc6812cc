import type pg from 'pg';
import type { DemoWrite } from '../../libs/adapters/demo/demo-agent-host.ts';
import { DemoHostClient } from '../../libs/adapters/demo/demo-host-client.ts';
import type { AttemptRow, HandoffRow, NotBeforeRow } from './invariants.ts';
import type { ReasonedEvent } from './uncertain-summary.ts';

/** What the invariants are checked against, read once the run is over. */
export interface Observations {
  readonly writes: DemoWrite[];
  readonly handoffs: HandoffRow[];
  readonly attempts: AttemptRow[];
  readonly events: ReasonedEvent[];
  readonly notBefore: NotBeforeRow[];
}

const ms = (d: Date | null) => (d === null ? null : d.getTime());

/**
 * Reads the demo host's write log (every write attempt any worker made, in arrival order) and,
 * straight from Postgres, every handoff, attempt and event of the run, the `not_before`
 * history and the commit times the run's triggers kept.
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
      pool.query<{ handoffId: string; requestId: string; startedAt: Date; status: string; committedAt: Date | null }>(
        `SELECT d.handoff_id AS "handoffId", d.request_id AS "requestId", d.started_at AS "startedAt", d.status::text AS status, c.at AS "committedAt"
         FROM delivery_attempts d LEFT JOIN chaos.commit_log c ON c.kind = 'attempt' AND c.ref = d.id::text`,
      ),
      pool.query<{
        id: string;
        handoffId: string;
        to: ReasonedEvent['to'];
        event: string;
        actor: string | null;
        reason: string | null;
        workFrom: string | null;
        workTo: string | null;
        at: Date;
        committedAt: Date | null;
      }>(
        `SELECT e.id::text AS id, e.handoff_id AS "handoffId", e.to_state AS "to", e.event, e.actor_id AS actor, e.reason,
           e.work_from_state::text AS "workFrom", e.work_to_state::text AS "workTo", e.created_at AS at, c.at AS "committedAt"
         FROM handoff_events e LEFT JOIN chaos.commit_log c ON c.kind = 'event' AND c.ref = e.id::text ORDER BY e.id`,
      ),
      pool.query<{ handoffId: string; notBefore: Date | null; at: Date }>(
        'SELECT handoff_id AS "handoffId", not_before AS "notBefore", at FROM chaos.not_before_log',
      ),
    ]);
    return {
      writes,
      handoffs: handoffs.rows.map((r) => ({ ...r, seq: Number(r.seq) })),
      attempts: attempts.rows.map((r) => ({
        handoffId: r.handoffId,
        requestId: r.requestId,
        reservedAt: r.startedAt.getTime(),
        status: r.status,
        ...(r.committedAt ? { committedAt: r.committedAt.getTime() } : {}),
      })),
      events: events.rows.map(({ committedAt, ...r }) => ({
        ...r,
        id: Number(r.id),
        at: r.at.getTime(),
        ...(committedAt ? { committedAt: committedAt.getTime() } : {}),
      })),
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

/**
 * Everything the run recorded about some handoffs (their events with reasons, attempts, writes
 * and `not_before` values), for the file a failed run keeps beside the logs: the database is
 * gone with the run, and a violation is read from these.
 */
export function recordsOf(obs: Observations, handoffIds: ReadonlySet<string>) {
  const of = <T extends { handoffId: string }>(rows: readonly T[]) => rows.filter((r) => handoffIds.has(r.handoffId));
  return {
    handoffs: obs.handoffs.filter((h) => handoffIds.has(h.id)),
    events: of(obs.events),
    attempts: of(obs.attempts),
    writes: of(obs.writes),
    notBefore: of(obs.notBefore),
  };
}
