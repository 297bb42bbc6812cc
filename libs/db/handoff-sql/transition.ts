import { prepared, type Queryable } from '../prepared.ts';
import { buildTransition, sameTextPerShape, type BuiltTransition } from './build-transition.ts';
import { GROUP_COMMIT_DEFAULTS } from '../../config/component-defaults.ts';
import { toWorkItem, type ReservedRow, type WorkRow } from './next-work.ts';
import type { TransitionWrite, TransitionWritten } from './transition-write.ts';

/** A turn end's row: the moved handoff's revision and events, and the next head's columns (all null when there is none). */
export type TurnEndRow = Partial<WorkRow> & ReservedRow & { movedRevision: number; movedEventIds: string[]; n?: number };

function toTurnEnd(row: TurnEndRow, w: TransitionWrite): TransitionWritten {
  const { movedRevision, movedEventIds, n: _n, ...next } = row;
  return {
    revision: movedRevision,
    eventIds: movedEventIds,
    nextWork: next.id ? toWorkItem(next as WorkRow & ReservedRow, w.thenNextWork?.reserve) : null,
  };
}

/**
 * The compare-and-set transition: moves the row only if it is still in the first step's
 * `from` at `expectRevision`, bumps the revision once per step, and appends one event per
 * step (and the attempt changes) in the same statement. Returns the new revision and the ids
 * of every event row the statement appended (in id order), or null when the row was not in
 * the expected state (nothing was written). The ends of turns (`thenNextWork`) of the same
 * moment share one statement (GroupCommit, `transitionBatch`), each row applied as if alone.
 */
export async function transitionAlone(db: Queryable, w: TransitionWrite): Promise<TransitionWritten | null> {
  const built = buildTransition(w, false);
  const sql = sameTextPerShape(built.shape, built.text, built.values.length);
  if (!w.thenNextWork) {
    const { rows } = await prepared<TransitionWritten>(db, sql, built.values);
    return rows[0] ?? null;
  }
  const { rows } = await prepared<TurnEndRow>(db, sql, built.values);
  return rows[0] ? toTurnEnd(rows[0], w) : null;
}

/**
 * Turn ends of one moment: writes of the same shape, each of its own handoff and recipient,
 * go in one statement (a write whose handoff or recipient is already in a group starts
 * another, so no row of a statement can meet another's); the groups run side by side.
 */
export async function transitionBatch(db: Queryable, items: TransitionWrite[]): Promise<Array<TransitionWritten | null>> {
  if (items.length === 1) return [await transitionAlone(db, items[0]!)];
  const groups: Array<{ key: string; built: BuiltTransition[]; at: number[]; taken: Set<string> }> = [];
  items.forEach((w, i) => {
    const built = buildTransition(w, true);
    const key = built.shape.join('|');
    const ids = [w.handoffId, `r:${w.thenNextWork?.recipientId ?? w.handoffId}`];
    const group = groups.find(
      (g) => g.key === key && g.built.length < GROUP_COMMIT_DEFAULTS.turnEndMaxBatch && !ids.some((x) => g.taken.has(x)),
    );
    if (group) {
      group.built.push(built);
      group.at.push(i);
      for (const x of ids) group.taken.add(x);
    } else groups.push({ key, built: [built], at: [i], taken: new Set(ids) });
  });
  const out: Array<TransitionWritten | null> = new Array<TransitionWritten | null>(items.length).fill(null);
  await Promise.all(
    groups.map(async (g) => {
      if (g.built.length === 1) {
        out[g.at[0]!] = await transitionAlone(db, items[g.at[0]!]!);
        return;
      }
      const first = g.built[0]!;
      const sql = sameTextPerShape(first.shape, first.text, first.values.length);
      const input = g.built.map((b, n) => {
        const row: Record<string, unknown> = { n };
        b.values.forEach((v, k) => {
          row[`c${k + 1}`] = v;
        });
        return row;
      });
      const { rows } = await prepared<TurnEndRow & { batchN: number }>(db, sql, [JSON.stringify(input)]);
      for (const { batchN, ...row } of rows) {
        const i = g.at[batchN]!;
        out[i] = toTurnEnd(row, items[i]!);
      }
    }),
  );
  return out;
}
