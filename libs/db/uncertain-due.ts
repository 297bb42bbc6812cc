import { handoffColumns } from './handoff-sql/columns.ts';
import { prepared, type Queryable } from './prepared.ts';
import type { HandoffRecord } from './records.ts';

/** An UNCERTAIN handoff due for a history scan, with the attempt whose write is in doubt. */
export interface UncertainCandidate {
  handoff: HandoffRecord;
  attemptId: string | null;
  requestId: string | null;
  absentScans: number;
  firstAbsentAt: Date | null;
  /** A final report of the attempt is on record (a webhook's signed callback): observing it reads that report. */
  reported: boolean;
  /** Looks in a row that failed outright (its last event's `detail.failedLooks`; 0 after anything else). */
  failedLooks: number;
}

export interface UncertainDueQuery {
  readonly now: Date;
  readonly limit: number;
  /** Only handoffs to agents of this deployment: another deployment observes its own. */
  readonly deployment: string;
  /** Only these providers and worker pools (a session can only be observed from its pool's host); absent: all. */
  readonly scope?: { readonly providers: readonly string[]; readonly pools: readonly string[] } | undefined;
  /** Handoffs this process observes now with their report on record: not offered again. */
  readonly observing?: readonly string[];
  /** Handoffs this process is looking at (no report when the look began): offered again only once a final report is on record. */
  readonly looking?: readonly string[];
  /** Providers with no free slot for looks: their unreported handoffs are not offered... */
  readonly lookSlotsFull?: readonly string[];
  /** ...and those with no free slot for reported turns: their reported handoffs are not. */
  readonly reportedSlotsFull?: readonly string[];
}

/**
 * UNCERTAIN handoffs due for a history scan (libs/handoffs/reconcile-uncertain.ts), with the
 * attempt in doubt. Due is: its next-scan time (`not_before`) has come; or a final report of the
 * attempt is on record (`turn_reports`, not `running`) and its last event is not a failed look,
 * so a callback that arrives after an incomplete scan is taken up at the next pass, not 5
 * minutes later, while a turn whose observation keeps failing still backs off. Reported ones
 * come first, then by due time, then in send order; the rows a caller is observing, or whose
 * slots are full, are left out (`$6`-`$9`), so a page never fills up with what cannot start.
 * `failedLooks` is read from the last event only for the rows returned.
 */
export const UNCERTAIN_DUE_SQL = `
  SELECT ${handoffColumns('h')}, a.id AS "attemptId", a.request_id AS "requestId", a.absent_scans AS "absentScans",
    a.first_absent_at AS "firstAbsentAt", (tr.request_id IS NOT NULL) AS reported,
    COALESCE((SELECT (e.detail->>'failedLooks')::int FROM handoff_events e WHERE e.handoff_id = h.id ORDER BY e.id DESC LIMIT 1), 0) AS "failedLooks"
  FROM handoffs h
  JOIN agents r ON r.id = h.recipient_id AND r.deployment = $3
  LEFT JOIN LATERAL (SELECT d.id, d.request_id, d.absent_scans, d.first_absent_at FROM delivery_attempts d WHERE d.handoff_id = h.id ORDER BY d.number DESC LIMIT 1) a ON true
  LEFT JOIN turn_reports tr ON tr.request_id = a.request_id AND tr.status <> 'running'
  WHERE h.delivery_state = 'UNCERTAIN' AND h.provider IS NOT NULL
    AND ($4::text[] IS NULL OR h.provider::text = ANY($4::text[])) AND ($5::text[] IS NULL OR h.pool = ANY($5::text[]))
    AND NOT (h.id = ANY($6::uuid[]))
    AND CASE WHEN tr.request_id IS NULL
      THEN NOT (h.id = ANY($7::uuid[])) AND NOT (h.provider::text = ANY($8::text[])) AND (h.not_before IS NULL OR h.not_before <= $1)
      ELSE NOT (h.provider::text = ANY($9::text[])) AND (h.not_before IS NULL OR h.not_before <= $1
        OR (SELECT e.detail->>'failedLooks' FROM handoff_events e WHERE e.handoff_id = h.id ORDER BY e.id DESC LIMIT 1) IS NULL)
    END
  ORDER BY (tr.request_id IS NOT NULL) DESC, h.not_before NULLS FIRST, h.seq
  LIMIT $2`;

/** Reads of the UNCERTAIN handoffs the reconciler observes. */
export class UncertainDue {
  constructor(private readonly pool: Queryable) {}

  async due(q: UncertainDueQuery): Promise<UncertainCandidate[]> {
    const { rows } = await prepared<HandoffRecord & Omit<UncertainCandidate, 'handoff' | 'absentScans'> & { absentScans: number | null }>(
      this.pool,
      UNCERTAIN_DUE_SQL,
      [
        q.now,
        q.limit,
        q.deployment,
        q.scope ? [...q.scope.providers] : null,
        q.scope ? [...q.scope.pools] : null,
        [...(q.observing ?? [])],
        [...(q.looking ?? [])],
        [...(q.lookSlotsFull ?? [])],
        [...(q.reportedSlotsFull ?? [])],
      ],
    );
    return rows.map(({ attemptId, requestId, absentScans, firstAbsentAt, reported, failedLooks, ...handoff }) => ({
      handoff,
      attemptId,
      requestId,
      absentScans: absentScans ?? 0,
      firstAbsentAt,
      reported,
      failedLooks,
    }));
  }
}
