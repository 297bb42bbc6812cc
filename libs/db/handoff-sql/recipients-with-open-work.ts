import { DISPATCHABLE_STATES, LIVE_TURN_STATES } from '../../domain/delivery-states.ts';
import { prepared, type Queryable } from '../prepared.ts';
import type { ProviderName } from '../records.ts';
import { stateList } from './columns.ts';

/**
 * Recipients of `deployment` with open push work (the reconciler's sweep): dispatchable now,
 * or with a turn that may be live (`live`). Bounded by `limit`, oldest work first; agents of other
 * deployments neither appear nor use up the batch. A scan of handoffs_open_work_idx: only open
 * handoffs, however many settled ones the table holds.
 */
export async function recipientsWithOpenWork(
  db: Queryable,
  now: Date,
  limit: number,
  deployment: string,
): Promise<Array<{ recipientId: string; provider: ProviderName; pool: string; live: boolean }>> {
  const { rows } = await prepared<{ recipientId: string; provider: ProviderName; pool: string; live: boolean }>(
    db,
    `SELECT open.recipient_id AS "recipientId", open.provider, open.pool, open.live FROM (
         SELECT recipient_id, provider, pool, min(seq) AS first_seq,
           bool_or(delivery_state IN (${stateList(LIVE_TURN_STATES)}) AND attempt_count > 0) AS live FROM handoffs
         WHERE recipient_id IS NOT NULL AND provider IS NOT NULL AND provider <> 'manual'
           AND ((delivery_state IN (${stateList(LIVE_TURN_STATES)}) AND attempt_count > 0)
             OR (delivery_state IN (${stateList(DISPATCHABLE_STATES)}) AND (not_before IS NULL OR not_before <= $1)))
         GROUP BY recipient_id, provider, pool
       ) open JOIN agents r ON r.id = open.recipient_id AND r.deployment = $3
       ORDER BY open.first_seq LIMIT $2`,
    [now, limit, deployment],
  );
  return rows;
}
