import type { AttemptStatus } from './records.ts';
import { prepared, type Queryable } from './prepared.ts';

/** What a handoff's writes before one of its attempts came to (libs/handoffs/write-retries.ts). */
export interface AttemptHistory {
  /** Earlier writes the recipient took: every status but `busy` and `not_sent` (it ran, failed, refused, or its answer was lost). */
  readonly taken: number;
  /** The `busy` answers in a row right before the attempt. */
  readonly busyInRow: number;
  /** The writes that never left Baton (`not_sent`) in a row right before the attempt... */
  readonly unsentInRow: number;
  /** ...when the first of them started, and when the last one did (null when there are none). */
  readonly unsentSince: Date | null;
  readonly unsentLast: Date | null;
}

const BUSY: AttemptStatus = 'busy';
const NOT_SENT: AttemptStatus = 'not_sent';

/**
 * One statement over the handoff's attempts before number $2 (the unique (handoff_id, number)
 * index): how many the recipient took, and the runs of busy answers and of unsent writes that
 * end right before it (a run ends at the newest attempt of any other status).
 */
export const ATTEMPT_HISTORY_SQL = `
  WITH earlier AS (
    SELECT number, status, started_at FROM delivery_attempts WHERE handoff_id = $1 AND number < $2
  ), breaks AS (
    SELECT COALESCE(max(number) FILTER (WHERE status <> $3::attempt_status), 0) AS busy_from,
           COALESCE(max(number) FILTER (WHERE status <> $4::attempt_status), 0) AS unsent_from
    FROM earlier
  )
  SELECT count(*) FILTER (WHERE e.status <> $3::attempt_status AND e.status <> $4::attempt_status)::int AS taken,
         count(*) FILTER (WHERE e.status = $3::attempt_status AND e.number > b.busy_from)::int AS "busyInRow",
         count(*) FILTER (WHERE e.status = $4::attempt_status AND e.number > b.unsent_from)::int AS "unsentInRow",
         min(e.started_at) FILTER (WHERE e.status = $4::attempt_status AND e.number > b.unsent_from) AS "unsentSince",
         max(e.started_at) FILTER (WHERE e.status = $4::attempt_status AND e.number > b.unsent_from) AS "unsentLast"
  FROM earlier e CROSS JOIN breaks b`;

/**
 * Reads of a handoff's earlier attempts, for the engine's retry of a write that did not become a
 * turn. Asked only when a handoff is written again (its attempt 2 or later), never for a first write.
 */
export class AttemptHistoryRepository {
  constructor(private readonly pool: Queryable) {}

  /** The attempts of `handoffId` numbered below `number`. */
  async before(handoffId: string, number: number): Promise<AttemptHistory> {
    const { rows } = await prepared<AttemptHistory>(this.pool, ATTEMPT_HISTORY_SQL, [handoffId, number, BUSY, NOT_SENT]);
    return rows[0] ?? { taken: 0, busyInRow: 0, unsentInRow: 0, unsentSince: null, unsentLast: null };
  }
}
