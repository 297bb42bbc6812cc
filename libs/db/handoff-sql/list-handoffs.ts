import type { DeliveryState } from '../../domain/delivery-states.ts';
import type { Viewer } from '../../domain/visibility.ts';
import type { WorkState } from '../../domain/work-states.ts';
import { prepared, type Queryable } from '../prepared.ts';
import type { HandoffView } from '../records.ts';
import { visibleSql } from '../visible-sql.ts';
import { VIEW_COLUMNS, VIEW_FROM } from './columns.ts';

/** A project's handoffs as a viewer may see them: a page of them, how many are hidden, how many per state. */
export interface HandoffFilter {
  projectId: string;
  recipientId?: string;
  senderId?: string;
  states?: readonly DeliveryState[];
  /** Only handoffs in one of these (delivery state, work state) pairs; work null: a plain message. */
  statePairs?: ReadonlyArray<{ readonly delivery: DeliveryState; readonly work: WorkState | null }>;
  /** Only handoffs updated at or after this time. */
  updatedAfter?: Date;
  /** Only handoffs of this A2A context: the session, or a handoff without one whose id it is. */
  contextId?: string;
  /** Only what this caller may see. */
  viewer: Viewer;
  /** Only rows with seq below this (newest first paging). */
  beforeSeq?: bigint;
  limit: number;
}

/** The project, recipient, sender and state conditions of a filter on alias `h`, appending their parameters. */
function filterSql(
  f: Pick<HandoffFilter, 'projectId' | 'recipientId' | 'senderId' | 'states' | 'statePairs' | 'updatedAfter' | 'contextId'>,
  params: unknown[],
): string[] {
  params.push(f.projectId);
  const where = [`h.project_id = $${params.length}`];
  if (f.recipientId) {
    params.push(f.recipientId);
    where.push(`h.recipient_id = $${params.length}`);
  }
  if (f.senderId) {
    params.push(f.senderId);
    where.push(`h.sender_id = $${params.length}`);
  }
  if (f.states && f.states.length > 0) {
    params.push(f.states);
    where.push(`h.delivery_state = ANY($${params.length}::delivery_state[])`);
  }
  if (f.statePairs) {
    params.push(
      f.statePairs.map((p) => p.delivery),
      f.statePairs.map((p) => p.work),
    );
    where.push(
      `EXISTS (SELECT 1 FROM unnest($${params.length - 1}::delivery_state[], $${params.length}::work_state[]) AS p(d, w)
        WHERE h.delivery_state = p.d AND h.work_state IS NOT DISTINCT FROM p.w)`,
    );
  }
  if (f.updatedAfter) {
    params.push(f.updatedAfter);
    where.push(`h.updated_at >= $${params.length}::timestamptz`);
  }
  if (f.contextId) {
    params.push(f.contextId);
    where.push(`(h.session_id = $${params.length}::uuid OR (h.session_id IS NULL AND h.id = $${params.length}::uuid))`);
  }
  return where;
}

/** Newest first; `beforeSeq` continues a page. */
export async function listHandoffs(db: Queryable, f: HandoffFilter): Promise<HandoffView[]> {
  const params: unknown[] = [];
  const where = filterSql(f, params);
  where.push(visibleSql(f.viewer, params));
  if (f.beforeSeq !== undefined) {
    params.push(f.beforeSeq.toString());
    where.push(`h.seq < $${params.length}::bigint`);
  }
  params.push(f.limit);
  const { rows } = await prepared<HandoffView>(
    db,
    `SELECT ${VIEW_COLUMNS} FROM ${VIEW_FROM} WHERE ${where.join(' AND ')} ORDER BY h.seq DESC LIMIT $${params.length}`,
    params,
  );
  return rows;
}

/** How many handoffs match the filter and are visible to its viewer: every page's rows together. */
export function countHandoffs(db: Queryable, f: Omit<HandoffFilter, 'limit' | 'beforeSeq'>): Promise<number> {
  return countMatching(db, f, (visible) => visible);
}

/**
 * How many handoffs match the filter's project, recipient, sender and states but are hidden
 * from its viewer (0 for an all-owners view, without a query). For an admin's narrowed view
 * only: the API never tells an agent how much it may not see.
 */
export async function countHiddenHandoffs(db: Queryable, f: Omit<HandoffFilter, 'limit' | 'beforeSeq'>): Promise<number> {
  if (f.viewer.allOwners) return 0;
  // IS NOT TRUE: the rule compares with a NULL agent or token id, which yields NULL, not false.
  return countMatching(db, f, (visible) => `(${visible}) IS NOT TRUE`);
}

/** Counts the handoffs matching the filter and `visibility` (built from the viewer's visibility rule). */
async function countMatching(
  db: Queryable,
  f: Omit<HandoffFilter, 'limit' | 'beforeSeq'>,
  visibility: (visibleRule: string) => string,
): Promise<number> {
  const params: unknown[] = [];
  const where = filterSql(f, params);
  where.push(visibility(visibleSql(f.viewer, params)));
  const { rows } = await prepared<{ n: number }>(db, `SELECT count(*)::int AS n FROM handoffs h WHERE ${where.join(' AND ')}`, params);
  return rows[0]?.n ?? 0;
}

export async function countHandoffsByState(db: Queryable, projectId: string, viewer: Viewer): Promise<Map<DeliveryState, number>> {
  const params: unknown[] = [projectId];
  const { rows } = await prepared<{ state: DeliveryState; n: number }>(
    db,
    `SELECT h.delivery_state AS state, count(*)::int AS n FROM handoffs h WHERE h.project_id = $1 AND ${visibleSql(viewer, params)} GROUP BY h.delivery_state`,
    params,
  );
  return new Map(rows.map((r) => [r.state, r.n]));
}
