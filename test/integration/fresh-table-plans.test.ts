import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HandoffRepository, NEXT_WORK_MANY_SQL, type Queryable, type TransitionWrite } from '../../libs/db/handoff-repository.ts';
import { DISPATCHABLE_STATES, LIVE_TURN_STATES } from '../../libs/domain/delivery-states.ts';
import { useTestDatabaseClient } from '../support/test-database.ts';

/**
 * The hot statements' plans on a database whose tables have no statistics yet (a new
 * deployment, until autovacuum's first ANALYZE). Prepared statements keep the plan made then
 * in every connection, so a look-up by id or by recipient that picks a state-wide index walks
 * every handoff in that state for as long as the connection lives; a full (delivery_state, seq)
 * index was that pick (docs/PERFORMANCE.md, "Indexes that only hold open work"). Each
 * statement is captured as the repository builds it and explained as a generic plan (what a
 * prepared statement keeps) and as a custom one.
 */

/** Indexes over many handoffs of every recipient: no per-handoff look-up may walk them. */
const WIDE_INDEXES = ['handoffs_open_work_idx', 'handoffs_project_id_seq_idx', 'handoffs_sender_id_seq_idx', 'handoffs_seq_key'];

/**
 * The (delivery_state, seq) index holds only HELD and UNCERTAIN handoffs (rare by nature), so a
 * probe for "another handoff of this recipient is UNCERTAIN" may take it; nothing else may.
 */
function expectNarrow(scans: PlanNode[]): void {
  for (const scan of scans) {
    expect(scan['Node Type']).not.toBe('Seq Scan');
    expect(WIDE_INDEXES).not.toContain(scan['Index Name']);
    if (scan['Index Name'] === 'handoffs_delivery_state_seq_idx') expect(scan['Index Cond']).toMatch(/'(UNCERTAIN|HELD)'/);
  }
}

const db = useTestDatabaseClient();

/** The statements a repository call sends, without running them. */
async function captured(call: (repo: HandoffRepository) => Promise<unknown>): Promise<pg.QueryConfig[]> {
  const sent: pg.QueryConfig[] = [];
  const recorder: Queryable = {
    query: async (config) => {
      sent.push(config);
      return { rows: [], rowCount: 0, command: '', oid: 0, fields: [] } as never;
    },
  };
  await call(new HandoffRepository(recorder)).catch(() => undefined);
  return sent;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** Every scan of `handoffs` in the statement's plan, under the given plan_cache_mode. */
async function handoffScans(config: pg.QueryConfig, mode: 'force_generic_plan' | 'force_custom_plan'): Promise<PlanNode[]> {
  const values = (config.values ?? []).map((v) => (v === null || v === undefined ? 'NULL' : db.client().escapeLiteral(serialise(v))));
  await db.client().query(`SET plan_cache_mode = ${mode}`);
  await db.client().query('DEALLOCATE ALL');
  await db.client().query(`PREPARE probe AS ${config.text}`);
  const { rows } = await db.client().query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) EXECUTE probe${values.length ? `(${values.join(', ')})` : ''}`);
  return nodes(rows[0]!['QUERY PLAN'][0]!.Plan).filter((n) => n['Relation Name'] === 'handoffs');
}

/** A parameter as node-postgres sends it (arrays as Postgres array literals, dates as ISO text). */
function serialise(v: unknown): string {
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return `{${v.map((x) => `"${String(x)}"`).join(',')}}`;
  return String(v);
}

const uuid = (n: number) => `00000000-0000-4000-8000-${n.toString().padStart(12, '0')}`;
const at = new Date('2026-12-01T00:00:00Z');
const system = { event: 'x', actorKind: 'system' as const, actorId: 'worker-1' };

/** The end of a turn that returned, reading and reserving the recipient's next head: the statement every push turn ends with. */
const turnEnd: TransitionWrite = {
  handoffId: uuid(1),
  expectRevision: 3,
  at,
  steps: [
    { from: 'SENDING', to: 'ACCEPTED', event: { ...system, event: 'accepted' } },
    { from: 'ACCEPTED', to: 'RETURNED', event: { ...system, event: 'returned' } },
  ],
  patch: { resultSummary: 'done', result: { ok: true }, settledAt: at, inProgressKey: null },
  updateAttempt: { id: uuid(2), status: 'returned', finished: true, observed: true, accepted: true },
  alsoWork: { from: ['open', 'claimed'], to: 'returned', event: { ...system, event: 'returned' }, result: 'succeeded' },
  thenNextWork: {
    recipientId: uuid(3),
    now: at,
    deployment: 'baton',
    reserve: {
      attemptId: uuid(4),
      requestId: uuid(5),
      workerId: 'worker-1',
      fence: 7n,
      provider: 'demo',
      passing: { none: true, rules: ['allow'] },
      to: 'SENDING',
      queued: { to: 'BUSY', event: 'queued_behind_turn', reason: 'queued' },
      queuedBusy: true,
    },
  },
};

describe('hot statements on tables without statistics', () => {
  it('starts from tables never analysed', async () => {
    const { rows } = await db.client().query<{ reltuples: number }>(`SELECT reltuples FROM pg_class WHERE relname = 'handoffs'`);
    expect(rows[0]!.reltuples).toBe(-1);
  });

  it.each(['force_generic_plan', 'force_custom_plan'] as const)('the end of a turn finds its handoff by primary key and the next head by recipient (%s)', async (mode) => {
    const [statement] = await captured((repo) => repo.transition(turnEnd));
    expect(statement?.text).toContain('r_moved');
    const scans = await handoffScans(statement!, mode);
    expect(scans.length).toBeGreaterThan(5);
    expectNarrow(scans);
    const byIndex = (name: string) => scans.filter((s) => s['Index Name'] === name).length;
    expect(byIndex('handoffs_pkey')).toBeGreaterThanOrEqual(3);
    expect(byIndex('handoffs_recipient_id_delivery_state_seq_idx')).toBeGreaterThanOrEqual(LIVE_TURN_STATES.length + DISPATCHABLE_STATES.length);
  });

  it.each(['force_generic_plan', 'force_custom_plan'] as const)('a batch of reserving look-ups probes by recipient only (%s)', async (mode) => {
    const input = [{ n: 0, recipient: uuid(3), now: at.toISOString(), deployment: 'baton', attempt_id: uuid(4), request_id: uuid(5), worker_id: 'w', fence: 1 }];
    const scans = await handoffScans({ text: NEXT_WORK_MANY_SQL, values: [JSON.stringify(input)] }, mode);
    expect(scans.length).toBeGreaterThan(5);
    expectNarrow(scans);
    expect(scans.filter((s) => s['Index Name'] === 'handoffs_recipient_id_delivery_state_seq_idx').length).toBeGreaterThanOrEqual(LIVE_TURN_STATES.length);
  });
});
