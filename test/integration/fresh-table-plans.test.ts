import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { HandoffRepository, type Queryable, type TransitionWrite } from '../../libs/db/handoff-repository.ts';
import { NEXT_WORK_MANY_SQL } from '../../libs/db/handoff-sql/head-reservation.ts';
import { DISPATCHABLE_STATES, LIVE_TURN_STATES } from '../../libs/domain/delivery-states.ts';
import { useTestDatabaseClient } from '../support/test-database.ts';

/**
 * The hot statements' plans where the statistics do not describe the table: a new database
 * (no statistics until autovacuum's first ANALYZE), and one analysed in a quiet hour (few open
 * handoffs) that now holds many. Prepared statements keep the plan made then in every
 * connection, so a look-up by id or by recipient that picks an index over a whole state (or
 * over all open work) walks it for every turn for as long as the connection lives: a full
 * (delivery_state, seq) index was the first case's pick, a partial index of open work the
 * second's (23 ms per turn end at 10,000 open handoffs; docs/performance-history.md, "Indexes
 * that only hold open work"). Each statement is captured as the repository builds it and
 * explained as a generic plan (what a prepared statement keeps) and as a custom one.
 */

/** Indexes over many handoffs of every recipient, or over a whole state: no per-handoff look-up may walk them. */
const WIDE_INDEXES = [
  'handoffs_open_work_idx',
  'handoffs_delivery_state_seq_idx',
  'handoffs_work_state_lease_expires_at_idx',
  'handoffs_project_id_seq_idx',
  'handoffs_sender_id_seq_idx',
  'handoffs_seq_key',
];

function expectNarrow(scans: PlanNode[]): void {
  for (const scan of scans) {
    expect(scan['Node Type']).not.toBe('Seq Scan');
    expect(WIDE_INDEXES).not.toContain(scan['Index Name']);
  }
}

const db = useTestDatabaseClient();

/** The statements a repository call sends, without running them. */
async function captured(call: (repo: HandoffRepository) => Promise<unknown>): Promise<pg.QueryConfig[]> {
  const sent: pg.QueryConfig[] = [];
  const recorder: Queryable = {
    query: async (config) => {
      sent.push(config);
      return { rows: [], rowCount: 0, command: '', oid: 0, fields: [] };
    },
  };
  // The recorder answers every statement with no rows, which the call may refuse: only what it sent matters.
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
  const { rows } = await db
    .client()
    .query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (FORMAT JSON) EXECUTE probe${values.length ? `(${values.join(', ')})` : ''}`,
    );
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
  moveWork: { from: ['open', 'claimed'], to: 'returned', event: { ...system, event: 'returned' }, result: 'succeeded' },
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

/** The end of a turn and a batch of reserving look-ups: by primary key and by recipient only. */
function hotStatementsStayNarrow(): void {
  it.each(['force_generic_plan', 'force_custom_plan'] as const)(
    'the end of a turn finds its handoff by primary key and the next head by recipient (%s)',
    async (mode) => {
      const [statement] = await captured((repo) => repo.transition(turnEnd));
      expect(statement?.text).toContain('r_moved');
      const scans = await handoffScans(statement!, mode);
      expect(scans.length).toBeGreaterThan(5);
      expectNarrow(scans);
      const byIndex = (name: string) => scans.filter((s) => s['Index Name'] === name).length;
      expect(byIndex('handoffs_pkey')).toBeGreaterThanOrEqual(3);
      expect(byIndex('handoffs_recipient_id_delivery_state_seq_idx')).toBeGreaterThanOrEqual(
        LIVE_TURN_STATES.length + DISPATCHABLE_STATES.length,
      );
    },
  );

  it.each(['force_generic_plan', 'force_custom_plan'] as const)(
    'the ends of several turns in one statement find each handoff by primary key and each next head by recipient (%s)',
    async (mode) => {
      const reserve = turnEnd.thenNextWork!.reserve!;
      const other: TransitionWrite = {
        ...turnEnd,
        handoffId: uuid(6),
        updateAttempt: { ...turnEnd.updateAttempt!, id: uuid(7) },
        thenNextWork: { ...turnEnd.thenNextWork!, recipientId: uuid(8), reserve: { ...reserve, attemptId: uuid(9), requestId: uuid(12) } },
      };
      const [statement] = await captured((repo) => Promise.all([repo.transition(turnEnd), repo.transition(other)]));
      expect(statement?.text).toMatch(/^WITH x AS \(SELECT \* FROM jsonb_to_recordset/);
      const scans = await handoffScans(statement!, mode);
      expectNarrow(scans);
      const byIndex = (name: string) => scans.filter((s) => s['Index Name'] === name).length;
      expect(byIndex('handoffs_pkey')).toBeGreaterThanOrEqual(3);
      expect(byIndex('handoffs_recipient_id_delivery_state_seq_idx')).toBeGreaterThanOrEqual(
        LIVE_TURN_STATES.length + DISPATCHABLE_STATES.length,
      );
    },
  );

  it.each(['force_generic_plan', 'force_custom_plan'] as const)(
    'a batch of reserving look-ups probes by recipient only (%s)',
    async (mode) => {
      const input = [
        {
          n: 0,
          recipient: uuid(3),
          now: at.toISOString(),
          deployment: 'baton',
          attempt_id: uuid(4),
          request_id: uuid(5),
          worker_id: 'w',
          fence: 1,
        },
      ];
      const scans = await handoffScans({ text: NEXT_WORK_MANY_SQL, values: [JSON.stringify(input)] }, mode);
      expect(scans.length).toBeGreaterThan(5);
      expectNarrow(scans);
      expect(scans.filter((s) => s['Index Name'] === 'handoffs_recipient_id_delivery_state_seq_idx').length).toBeGreaterThanOrEqual(
        LIVE_TURN_STATES.length,
      );
    },
  );
}

/**
 * `count` handoffs to 10 recipients (and held, UNCERTAIN and claimed ones among them), inserted
 * without their foreign rows: only the plans are looked at. `open`: share of them not settled.
 */
async function fill(count: number, open: boolean): Promise<void> {
  await db.client().query(`SET session_replication_role = replica`);
  try {
    await db.client().query(
      `INSERT INTO handoffs (id, project_id, sender_id, recipient_id, provider, message, content_hash, in_progress_key, delivery_state, work_state,
         attempt_count, lease_expires_at, created_at, updated_at, settled_at)
       SELECT gen_random_uuid(), $2, $3, ('00000000-0000-4000-9000-' || lpad((i % 10)::text, 12, '0'))::uuid, 'demo', 'm', md5(i::text),
         CASE WHEN $4 THEN gen_random_uuid()::text END,
         (CASE WHEN NOT $4 THEN 'RETURNED' WHEN i % 50 = 0 THEN 'UNCERTAIN' WHEN i % 50 = 1 THEN 'HELD' WHEN i % 7 = 0 THEN 'RUNNING' ELSE 'BUSY' END)::delivery_state,
         (CASE WHEN $4 AND i % 3 = 0 THEN 'claimed' WHEN $4 THEN 'open' ELSE 'returned' END)::work_state,
         CASE WHEN i % 7 = 0 THEN 1 ELSE 0 END, CASE WHEN $4 AND i % 3 = 0 THEN now() + interval '1 hour' END, now(), now(), CASE WHEN NOT $4 THEN now() END
       FROM generate_series(1, $1::int) i`,
      [count, uuid(10), uuid(11), open],
    );
  } finally {
    await db.client().query(`SET session_replication_role = DEFAULT`);
  }
}

describe('hot statements on tables without statistics', () => {
  it('starts from tables never analysed', async () => {
    const { rows } = await db.client().query<{ reltuples: number }>(`SELECT reltuples FROM pg_class WHERE relname = 'handoffs'`);
    expect(rows[0]!.reltuples).toBe(-1);
  });

  hotStatementsStayNarrow();
});

describe('hot statements on tables analysed in a quiet hour, now full of open work', () => {
  it('has statistics that say almost nothing is open', async () => {
    await fill(2_000, false);
    await fill(3, true);
    await db.client().query('ANALYZE handoffs');
    await fill(20_000, true);
    const { rows } = await db.client().query<{ open: number }>(`SELECT count(*)::int AS open FROM handoffs WHERE settled_at IS NULL`);
    expect(rows[0]!.open).toBe(20_003);
  });

  hotStatementsStayNarrow();
});

describe('hot statements on tables analysed with a deep backlog for few recipients, the oldest settled', () => {
  // Ten recipients with thousands of queued handoffs each, behind thousands settled: the
  // statistics say a recipient has hundreds of BUSY handoffs, so "the oldest of them" looks
  // cheaper found by walking every handoff in seq order (handoffs_seq_key) than by the
  // recipient's own index, and the walk passes every settled one first (33 ms per turn end,
  // seen with autovacuum's ANALYZE in the middle of a run).
  it('has statistics that say each recipient has hundreds of queued handoffs', async () => {
    await db.client().query('TRUNCATE handoffs CASCADE');
    await fill(20_000, false);
    await fill(10_000, true);
    await db.client().query('ANALYZE handoffs');
    const { rows } = await db.client().query<{ busy: number }>(`SELECT count(*)::int AS busy FROM handoffs WHERE delivery_state = 'BUSY'`);
    expect(rows[0]!.busy).toBeGreaterThan(5_000);
  });

  hotStatementsStayNarrow();
});

describe("the reconciler's indexes", () => {
  it('hold exactly the states the sweep and the gauge ask for (the migrations name them; libs/domain owns them)', async () => {
    const statesOf = async (index: string) => {
      const { rows } = await db
        .client()
        .query<{ p: string }>(`SELECT pg_get_expr(indpred, indrelid) AS p FROM pg_index WHERE indexrelid = $1::regclass`, [index]);
      return [...rows[0]!.p.matchAll(/'(\w+)'::delivery_state/g)].map((m) => m[1]).sort();
    };
    expect(await statesOf('handoffs_open_work_idx')).toEqual([...LIVE_TURN_STATES, ...DISPATCHABLE_STATES].sort());
    expect(await statesOf('handoffs_delivery_state_seq_idx')).toEqual(['HELD', 'UNCERTAIN']);
  });
});
