import { reservationParams, reservedColumns, reserveHeadSql } from './head-reservation.ts';
import { nextWorkSql } from './next-work.ts';
import type { HandoffCounter, HandoffPatch, TransitionWrite } from './transition-write.ts';
import { TOKEN_KINDS, type TokenKind } from '../../domain/turn-usage.ts';
import { GROUP_COMMIT_DEFAULTS, STATEMENT_CACHE_DEFAULTS } from '../../config/component-defaults.ts';

/** Transition texts kept per shape; a process uses a few dozen (STATEMENT_CACHE_DEFAULTS.transitionTexts bounds a surprise). */
const sameText = new Map<string, { text: string; params: number }>();

/**
 * The transition text built before for the same `shape` (the choices that decide the text), as
 * the very same string: the prepared-statement name is then a look-up of a string whose hash
 * V8 keeps, and pg's check that a name still means its text compares one pointer, where a text
 * built anew (several kilobytes for the end of a turn) is hashed and compared in full on every
 * call. Two texts of one shape with different lengths or parameter counts mean a choice missing
 * from the shape: that throws rather than run the wrong text.
 */
export function sameTextPerShape(shape: ReadonlyArray<string | number | boolean>, text: string, params: number): string {
  const key = shape.join('|');
  const known = sameText.get(key);
  if (known) {
    if (known.text.length !== text.length || known.params !== params)
      throw new Error(`transition shape ${key} built two different statements`);
    return known.text;
  }
  if (sameText.size < STATEMENT_CACHE_DEFAULTS.transitionTexts) sameText.set(key, { text, params });
  return text;
}

/** For tests: forgets the kept transition texts (the next of each shape is built and kept anew). */
export function forgetTransitionTexts(): void {
  sameText.clear();
}

const PATCH_COLUMNS: Record<keyof HandoffPatch, { column: string; cast: string }> = {
  deliveryDetail: { column: 'delivery_detail', cast: 'text' },
  notBefore: { column: 'not_before', cast: 'timestamptz' },
  resultSummary: { column: 'result_summary', cast: 'text' },
  result: { column: 'result', cast: 'jsonb' },
  settledAt: { column: 'settled_at', cast: 'timestamptz' },
  inProgressKey: { column: 'in_progress_key', cast: 'text' },
};

/** The attempt's column of each token count (the same names in every statement that reads them). */
export const USAGE_COLUMNS: Record<TokenKind, string> = {
  inputTokens: 'input_tokens',
  outputTokens: 'output_tokens',
  cacheReadTokens: 'cache_read_tokens',
  cacheWriteTokens: 'cache_write_tokens',
};

const COUNTER_COLUMNS: Record<HandoffCounter, string> = {
  attemptCount: 'attempt_count',
  refusals: 'refusals',
  errorResends: 'error_resends',
  interruptResends: 'interrupt_resends',
};

function jsonParam(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

/**
 * A transition statement as built for one write (`$n` parameters) or for one row of a batch
 * (`x.cN`: columns of the batch's input rows, `jsonb_to_recordset`, each typed as its use says).
 * `shape` lists every choice that changed the text; writes of one shape share one text.
 */
export interface BuiltTransition {
  shape: Array<string | number | boolean>;
  text: string;
  /** One write: the statement's parameters. A batch's row: its columns' values (c1, c2, ...). */
  values: unknown[];
}

/**
 * Builds the compare-and-set transition (transition.ts runs it) for one write, or,
 * with `many`, as the body of a statement that applies many writes of the same shape at once:
 * each CTE is then correlated to its input row (`x.n`), and every value comes from the row.
 */
export function buildTransition(w: TransitionWrite, many: boolean): BuiltTransition {
  const first = w.steps[0];
  const last = w.steps[w.steps.length - 1];
  if (!first || !last) throw new Error('a transition needs at least one step');
  const n = w.steps.length;
  const values: unknown[] = [];
  const columns: string[] = [];
  /** An expression for `value` as a `type`. */
  const p = (value: unknown, type: string): string => {
    values.push(type === 'jsonb' ? (many ? (value ?? null) : jsonParam(value)) : value);
    if (!many) return `$${values.length}::${type}`;
    columns.push(`c${values.length} ${type}`);
    return `x.c${values.length}`;
  };
  const id = p(w.handoffId, 'uuid');
  const expect = p(w.expectRevision, 'int');
  const from = p(first.from, 'delivery_state');
  const to = p(last.to, 'delivery_state');
  const at = p(w.at, 'timestamptz');
  const steps = p(n, 'int');
  // Correlation to the batch's input row: nothing for one write.
  const fromX = many ? 'x, ' : '';
  const updateFromX = many ? ' FROM x' : '';
  const rowN = (alias: string) => (many ? `${alias}.n, ` : '');
  const joinX = (alias: string) => (many ? ` JOIN x ON x.n = ${alias}.n` : '');
  const sameRow = (alias: string, other: string) => (many ? `${alias}.n = ${other}.n` : 'true');
  const movedForRow = many ? 'SELECT 1 FROM moved WHERE moved.n = x.n' : 'SELECT 1 FROM moved';

  // Every choice below that changes the text (not only the values) adds to `shape`.
  const shape: Array<string | number | boolean> = [many ? 'many' : 'one', n];
  const sets = [`delivery_state = ${to}`, `revision = revision + ${steps}`, `updated_at = ${at}`];
  for (const key of Object.keys(w.patch ?? {}) as Array<keyof HandoffPatch>) {
    const value = w.patch?.[key];
    if (value === undefined) continue;
    const { column, cast } = PATCH_COLUMNS[key];
    shape.push(key);
    sets.push(`${column} = ${p(value, cast)}`);
  }
  for (const counter of w.increment ?? []) {
    const column = COUNTER_COLUMNS[counter];
    shape.push(counter);
    sets.push(`${column} = ${column} + 1`);
  }
  let workFrom = '';
  shape.push('work', w.moveWork?.result ?? !!w.moveWork);
  if (w.moveWork) {
    workFrom = p(w.moveWork.from, 'work_state[]');
    const hit = `work_state = ANY(${workFrom})`;
    sets.push(
      `work_state = CASE WHEN ${hit} THEN ${p(w.moveWork.to, 'work_state')} ELSE work_state END`,
      `work_revision = CASE WHEN ${hit} THEN work_revision + 1 ELSE work_revision END`,
      `claim_token = CASE WHEN ${hit} THEN NULL ELSE claim_token END`,
      `lease_expires_at = CASE WHEN ${hit} THEN NULL ELSE lease_expires_at END`,
    );
    const result = w.moveWork.result;
    if (result === 'succeeded' || result === 'failed') {
      sets.push(
        `returned_at = CASE WHEN ${hit} THEN ${at} ELSE returned_at END`,
        `return_outcome = CASE WHEN ${hit} THEN ${p(result, 'text')} ELSE return_outcome END`,
      );
    } else if (result === 'cleared') {
      for (const column of ['returned_at', 'return_outcome', 'result_summary', 'result'])
        sets.push(`${column} = CASE WHEN ${hit} THEN NULL ELSE ${column} END`);
      sets.push(`result_fact_ids = CASE WHEN ${hit} THEN '{}' ELSE result_fact_ids END`);
    }
  }
  const attemptParam = p(w.insertAttempt?.id ?? w.updateAttempt?.id ?? null, 'uuid');
  const events = w.steps.map(
    (step, i) =>
      `SELECT moved.id, ${p(step.from, 'delivery_state')}, ${p(step.to, 'delivery_state')}, NULL::work_state, NULL::work_state, ${p(step.event.event, 'text')},
          ${p(step.event.actorKind, 'actor_kind')}, ${p(step.event.actorId, 'text')}, ${p(step.event.tokenId ?? null, 'uuid')}, ${p(step.event.reason ?? null, 'text')},
          ${p(step.event.detail, 'jsonb')}, moved.revision - ${n - 1 - i}, ${attemptParam}, ${at} FROM moved${joinX('moved')}`,
  );
  // The work's move, when there is one, is logged after the delivery's, in the same INSERT:
  // separate INSERTs in one statement run in no guaranteed order.
  if (w.moveWork) {
    const a = w.moveWork;
    events.push(
      `SELECT moved.id, ${to}, ${to}, before.work_state, ${p(a.to, 'work_state')}, ${p(a.event.event, 'text')},
          ${p(a.event.actorKind, 'actor_kind')}, ${p(a.event.actorId, 'text')}, ${p(a.event.tokenId ?? null, 'uuid')}, ${p(a.event.reason ?? null, 'text')}, NULL::jsonb, moved.revision, NULL::uuid, ${at}
        FROM moved JOIN before ON ${sameRow('before', 'moved')}${joinX('moved')} WHERE before.work_state = ANY(${workFrom})`,
    );
  }
  const fence = w.insertAttempt?.fence;
  const fenceParam = fence === undefined ? null : p(fence.toString(), 'bigint');
  const u = w.updateAttempt;
  shape.push(
    'att',
    !!w.insertAttempt,
    fenceParam !== null,
    !!u,
    u?.error !== undefined,
    !!u?.accepted,
    !!u?.finished,
    !!u?.observed,
    !!u?.absentScan,
    !!u?.usage,
  );
  shape.push('more', !!w.moveOthers, !!w.thenNextWork, !!w.thenNextWork?.reserve);
  // A batch's input rows say n >= 0 AND n < GROUP_COMMIT_DEFAULTS.turnEndMaxBatch, which is true, so that the
  // planner expects one of them (a range of unknown selectivity) rather than the 100 it
  // assumes of a set-returning function: it then finds each row's handoff, attempt and queue by
  // index (a nested loop), never by hashing the batch against a sequential scan of the table.
  let sql = `WITH ${many ? `x AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(n int, ${'$COLUMNS'}) WHERE x.n >= 0 AND x.n < ${GROUP_COMMIT_DEFAULTS.turnEndMaxBatch}), ` : ''}before AS (
        SELECT ${rowN('x')}h.work_state FROM ${fromX}handoffs h WHERE h.id = ${id}
      ),${
        fenceParam === null
          ? ''
          : ` fenced AS (
        INSERT INTO agent_turn_fences AS f (agent_id, fence)
        SELECT h.recipient_id, ${fenceParam} FROM ${fromX}handoffs h WHERE h.id = ${id} AND h.recipient_id IS NOT NULL
        ON CONFLICT (agent_id) DO UPDATE SET fence = EXCLUDED.fence WHERE f.fence <= EXCLUDED.fence
        RETURNING agent_id
      ),`
      } moved AS (
        UPDATE handoffs SET ${sets.join(', ')}${updateFromX}
        WHERE handoffs.id = ${id} AND (${expect} IS NULL OR handoffs.revision = ${expect}) AND handoffs.delivery_state = ${from}${
          fenceParam === null ? '' : ' AND EXISTS (SELECT 1 FROM fenced WHERE fenced.agent_id = handoffs.recipient_id)'
        }
        RETURNING ${rowN('x')}handoffs.id, handoffs.revision
      ), ev AS (
        INSERT INTO handoff_events (handoff_id, from_state, to_state, work_from_state, work_to_state, event, actor_kind, actor_id, token_id, reason, detail,
          revision, attempt_id, created_at)
        ${events.join(' UNION ALL ')}
        RETURNING id, handoff_id
      )`;
  if (w.insertAttempt) {
    const a = w.insertAttempt;
    sql += `, att AS (
        INSERT INTO delivery_attempts (id, handoff_id, number, request_id, status, worker_id, delivery_target, started_at, fence)
        SELECT ${p(a.id, 'uuid')}, moved.id, ${p(a.number, 'int')}, ${p(a.requestId, 'uuid')}, 'sending', ${p(a.workerId, 'text')}, ${p(a.deliveryTarget, 'text')}, ${at}, ${fenceParam ?? 'NULL::bigint'}
        FROM moved${joinX('moved')}
      )`;
  }
  if (u) {
    const attemptId = p(u.id, 'uuid');
    const attemptSets = [`status = ${p(u.status, 'attempt_status')}`];
    if (u.error !== undefined) attemptSets.push(`error = ${p(u.error, 'text')}`);
    if (u.accepted) attemptSets.push(`accepted_at = COALESCE(accepted_at, ${at})`);
    if (u.finished) attemptSets.push(`finished_at = ${at}`);
    if (u.observed) attemptSets.push(`last_observed_at = ${at}`);
    if (u.absentScan) attemptSets.push('absent_scans = absent_scans + 1', `first_absent_at = COALESCE(first_absent_at, ${at})`);
    if (u.usage) {
      const usage = u.usage;
      attemptSets.push(`model = ${p(usage.model ?? null, 'text')}`, `cost_usd = ${p(usage.costUsd ?? null, 'float8')}`);
      for (const kind of TOKEN_KINDS) attemptSets.push(`${USAGE_COLUMNS[kind]} = ${p(usage[kind] ?? null, 'bigint')}`);
    }
    sql += `, upd AS (
        UPDATE delivery_attempts SET ${attemptSets.join(', ')}${updateFromX}
        WHERE delivery_attempts.id = ${attemptId} AND EXISTS (${movedForRow})
      )`;
  }
  if (w.moveOthers) {
    const o = w.moveOthers;
    const queuedFrom = p(o.from, 'delivery_state');
    const queuedTo = p(o.to, 'delivery_state');
    const recipient = p(o.recipientId, 'uuid');
    sql += `, queued AS (
        UPDATE handoffs SET delivery_state = ${queuedTo}, revision = handoffs.revision + 1, updated_at = ${at}${updateFromX}
        WHERE handoffs.recipient_id = ${recipient} AND handoffs.delivery_state = ${queuedFrom} AND handoffs.id <> ${id}
          AND EXISTS (${movedForRow})
        RETURNING ${rowN('x')}handoffs.id, handoffs.revision
      ), queued_ev AS (
        INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, reason, revision, created_at)
        SELECT queued.id, ${queuedFrom}, ${queuedTo}, ${p(o.event.event, 'text')}, ${p(o.event.actorKind, 'actor_kind')},
          ${p(o.event.actorId, 'text')}, ${p(o.event.reason ?? null, 'text')}, queued.revision, ${at} FROM queued${joinX('queued')}
        RETURNING id, handoff_id
      )`;
  }
  const queuedIds = w.moveOthers
    ? ` UNION ALL SELECT qe.id FROM queued_ev qe JOIN queued q ON q.id = qe.handoff_id WHERE ${sameRow('q', 'moved')}`
    : '';
  const eventIds = `ARRAY(SELECT e.id::text FROM (SELECT ev.id FROM ev WHERE ev.handoff_id = moved.id${queuedIds}) e ORDER BY e.id)`;
  if (!w.thenNextWork) {
    sql += ` SELECT ${rowN('moved')}moved.revision, ${eventIds} AS "eventIds" FROM moved`;
  } else {
    const then = w.thenNextWork;
    const head = nextWorkSql(p(then.recipientId, 'uuid'), p(then.now, 'timestamptz'), p(then.deployment, 'text'), id);
    sql += many ? `, nw AS (SELECT x.n, w.* FROM x LEFT JOIN LATERAL (${head}) w ON true)` : `, nw AS (${head})`;
    // The next head is reserved only when this turn's end committed (and is never the ended one).
    if (then.reserve) {
      const movedToo = many ? 'SELECT 1 FROM moved WHERE moved.n = nw.n' : 'SELECT 1 FROM moved';
      sql += `, ${reserveHeadSql(reservationParams(then.reserve, p), many ? 'nw JOIN x ON x.n = nw.n' : 'nw', at, ` AND EXISTS (${movedToo}) AND nw.id <> ${id}`)}`;
    }
    // Named apart from the next handoff's own columns (`revision` among them).
    sql += ` SELECT ${many ? 'moved.n AS "batchN", ' : ''}moved.revision AS "movedRevision", ${eventIds} AS "movedEventIds", nw.*${then.reserve ? `, ${reservedColumns}` : ''}
      FROM moved LEFT JOIN nw ON ${sameRow('nw', 'moved')}`;
  }
  return { shape, text: many ? sql.replace('$COLUMNS', columns.join(', ')) : sql, values };
}
