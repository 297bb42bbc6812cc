import { handoffColumns } from './handoff-sql/columns.ts';
import type { DispatchCandidate } from './handoff-repository.ts';
import { prepared, type Queryable } from './prepared.ts';

/** A connection rule a HELD handoff's pair may have (`connections.rule`). */
export type ConnectionRule = 'allow' | 'block';

export interface HeldPageQuery {
  /** The seq of the last handoff of the previous page ('0' before the first page). */
  readonly after: bigint | string;
  readonly limit: number;
  /** Only holds on recipients of this deployment: a lifted hold is queued on its queues. */
  readonly deployment: string;
  /** Only holds whose pair has one of these rules... */
  readonly rules: readonly ConnectionRule[];
  /** ...or no rule at all, when true. */
  readonly noRule: boolean;
}

/**
 * One page of HELD handoffs (oldest first, by `seq`) to agents of `$3` whose sender-to-recipient
 * connection rule is one of `$4` (or none, when `$5`), after seq `$1`, at most `$2`, each with
 * its rule. A keyset page: the next starts after the last seq read, so every HELD handoff is
 * reached in bounded statements however many there are and whatever becomes of the rows already
 * read. The caller names the rules whose holds may have ended (libs/handoffs/lift-holds.ts
 * decides that with `holdReason`); holds that are still blocked are never read. Every handoff
 * with a recipient has a provider: the query says so to match the condition of
 * handoffs_delivery_state_seq_idx, whose order is the page's.
 */
export const HELD_PAGE_SQL = `
  SELECT ${handoffColumns('h')}, c.rule AS "connectionRule"
  FROM handoffs h
  JOIN agents r ON r.id = h.recipient_id AND r.deployment = $3
  LEFT JOIN connections c ON c.from_id = h.sender_id AND c.to_id = h.recipient_id
  WHERE h.delivery_state = 'HELD' AND h.provider IS NOT NULL AND h.seq > $1::bigint
    AND (c.rule::text = ANY($4::text[]) OR (c.rule IS NULL AND $5::boolean))
  ORDER BY h.seq
  LIMIT $2`;

/** Reads of HELD handoffs for lifting holds that no longer apply (libs/handoffs/lift-holds.ts). */
export class HeldHandoffs {
  constructor(private readonly pool: Queryable) {}

  /** The next page of holds whose rule may have ended; fewer than `limit` rows: the last page. */
  async page(q: HeldPageQuery): Promise<DispatchCandidate[]> {
    const { rows } = await prepared<DispatchCandidate>(this.pool, HELD_PAGE_SQL, [
      String(q.after),
      q.limit,
      q.deployment,
      [...q.rules],
      q.noRule,
    ]);
    return rows;
  }
}
