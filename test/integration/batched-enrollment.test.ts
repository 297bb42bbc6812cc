import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENROLL_SQL } from '../../libs/db/handoff-sql/enroll.ts';
import { LIVE_TURN_STATES } from '../../libs/domain/delivery-states.ts';
import { countStatements } from '../support/count-statements.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * Sends that come together share one enrollment statement (libs/db/group-commit.ts): each row
 * is still resolved, checked and answered as if it were alone. Every kind of answer a send can
 * get, in one batch, on a real Postgres.
 */
let baton: TestBaton;
let n = 0;
/** Enrollment statements the app's pool ran. */
let enrollStatements: ReturnType<typeof countStatements>;

async function agent(settings: Record<string, unknown> = {}): Promise<string> {
  const id = `be${++n}`;
  expect((await baton.post('/v1/agents', { id, provider: 'demo', settings })).status).toBe(201);
  return id;
}

beforeAll(async () => {
  baton = await startTestBaton();
  enrollStatements = countStatements(baton.db.pool, ENROLL_SQL);
  baton.startWorker();
});

afterAll(async () => {
  await baton?.stop();
});

describe('batched enrollment', () => {
  it('sends that share a statement each get the answer they would get alone', async () => {
    const [a, b, c] = [await agent(), await agent(), await agent()];
    const busy = await agent({ behavior: 'hang' });
    // A turn in flight at `busy`: what is sent to it now waits as BUSY.
    const first = await baton.post('/v1/handoffs', { from: a, to: busy, message: 'first turn', title: 'first' });
    await waitForState(baton, first.body.id, 'RUNNING');

    const before = enrollStatements.count();
    const sends: Array<[string, Record<string, unknown>]> = [
      ['plain', { from: a, to: b, message: 'plain one', title: 'plain one' }],
      ['plain2', { from: a, to: c, message: 'plain two', title: 'plain two' }],
      ['unknown recipient', { from: a, to: 'nobody-here', message: 'lost?' }],
      ['unknown sender', { from: 'nobody-there', to: b, message: 'who?' }],
      ['key, first', { from: b, to: c, message: 'keyed', idempotencyKey: 'k-batch' }],
      ['key, other content', { from: b, to: c, message: 'keyed but different', idempotencyKey: 'k-batch' }],
      ['identical 1', { from: c, to: b, message: 'same words', title: 'same' }],
      ['identical 2', { from: c, to: b, message: 'same words', title: 'same' }],
      ['to a busy recipient', { from: b, to: busy, message: 'after the first', title: 'second' }],
      ['to the project', { from: a, to: '@project', message: 'anyone', title: 'open work' }],
      ['unknown session', { from: a, to: b, message: 'in a session', session: '00000000-0000-4000-8000-000000000000' }],
    ];
    const results = await Promise.all(sends.map(([, body]) => baton.post('/v1/handoffs', body)));
    const by = Object.fromEntries(sends.map(([name], i) => [name, results[i]!]));
    // They shared statements: fewer enrollment statements than sends (the retries of the
    // conflicting ones included).
    const statements = enrollStatements.count() - before;
    expect(statements).toBeGreaterThan(0);
    expect(statements).toBeLessThan(sends.length);

    expect(by['plain']!.status).toBe(201);
    expect(by['plain2']!.status).toBe(201);
    expect(by['plain']!.body.to).toBe(b);
    expect(by['plain2']!.body.to).toBe(c);
    expect(by['unknown recipient']!.body.error.code).toBe('unknown_recipient');
    expect(by['unknown sender']!.body.error.code).toBe('unknown_sender');
    expect(by['unknown session']!.body.error.code).toBe('session_not_found');

    const keyed = [by['key, first']!, by['key, other content']!];
    expect(keyed.filter((r) => r.status === 201)).toHaveLength(1);
    const conflict = keyed.find((r) => r.status !== 201)!;
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('idempotency_conflict');

    const identical = [by['identical 1']!, by['identical 2']!];
    expect(identical.map((r) => r.status)).toEqual([201, 201]);
    const original = identical.find((r) => r.body.state !== 'DUPLICATE')!;
    const duplicate = identical.find((r) => r.body.state === 'DUPLICATE')!;
    expect(duplicate.body.duplicateOf).toBe(original.body.id);

    expect(by['to a busy recipient']!.body.state).toBe('BUSY');
    expect(by['to the project']!.status).toBe(201);
    expect(by['to the project']!.body.to).toBeNull();

    // Each row's timeline is its own: created, then (the busy one) the wait behind the turn.
    const timeline = async (id: string) => (await baton.get(`/v1/handoffs/${id}`)).body.events.map((e: { event: string }) => e.event);
    expect(await timeline(by['to a busy recipient']!.body.id)).toEqual(['enrolled', 'recipient_busy']);
    expect(await timeline(by['plain']!.body.id)).toContain('enrolled');
    expect((await timeline(duplicate.body.id))[0]).toBe('duplicate_detected');

    // Nothing refused was written; each accepted send is one row.
    const { rows } = await baton.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM handoffs WHERE message = ANY($1::text[])`, [
      sends.map(([, body]) => body['message']),
    ]);
    expect(rows[0]!.n).toBe(7);
    await waitForState(baton, by['plain']!.body.id, 'RETURNED');
    await waitForState(baton, by['plain2']!.body.id, 'RETURNED');
    expect(baton.host.writesByHandoff().get(by['plain']!.body.id)).toHaveLength(1);
  });
});

describe("the enrollment statement's plan", () => {
  it('probes indexes per row in its generic plan, with thousands of agents and live turns (never a scan of agents or handoffs)', async () => {
    // jsonb_to_recordset makes the generic plan expect 100 rows whatever the batch holds; joins
    // the planner may hash then scanned the whole agents table and every live handoff per
    // statement (3x slower than one row per statement). The look-ups are LIMIT 1 laterals.
    const project = 'plan-check';
    const pool = baton.db.pool;
    await pool.query(
      `INSERT INTO projects (id, workspace_id, slug, name) SELECT gen_random_uuid(), id, $1, $1 FROM workspaces WHERE slug = 'default'`,
      [project],
    );
    await pool.query(
      `INSERT INTO agents (id, project_id, handle, display_name, provider, deployment)
       SELECT gen_random_uuid(), p.id, 'pa' || g, 'pa' || g, 'manual', 'plan' FROM projects p, generate_series(1, 5000) g WHERE p.slug = $1`,
      [project],
    );
    await pool.query(
      `INSERT INTO handoffs (id, project_id, sender_id, recipient_id, recipient_generation, provider, message, content_hash, delivery_state, revision, created_at, updated_at, attempt_count)
       SELECT gen_random_uuid(), a.project_id, a.id, a.id, 1, 'manual', 'm', md5(a.handle), 'RUNNING', 0, now(), now(), 1
       FROM agents a JOIN projects p ON p.id = a.project_id WHERE p.slug = $1`,
      [project],
    );
    await pool.query('ANALYZE agents');
    await pool.query('ANALYZE handoffs');
    const row = (n: number) => ({
      n,
      id: crypto.randomUUID(),
      project,
      sender: 'pa1',
      recipient: `pa${n + 2}`,
      session: null,
      title: null,
      message: 'plan',
      focus: null,
      done_when: null,
      context_summary: null,
      open_questions: [],
      next_steps: [],
      due_at: null,
      idempotency_key: null,
      content_hash: `c${n}`,
      duplicate_of: null,
      state: 'WAITING',
      detail: null,
      guard: true,
      work_state: null,
      created_at: new Date(),
      event: 'enrolled',
      actor_kind: 'sender',
      actor_id: 'pa1',
      token_id: null,
      reason: null,
      event_detail: null,
      busy_if_live: true,
      busy_state: 'BUSY',
      busy_event: 'recipient_busy',
      busy_actor_kind: 'system',
      busy_actor_id: null,
      busy_reason: 'in a turn',
    });
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${ENROLL_SQL}`, [
        JSON.stringify([row(0), row(1)]),
        LIVE_TURN_STATES,
      ]);
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).toContain('Index Scan using agents_project_id_handle_key');
      expect(plan).not.toMatch(/Seq Scan on agents/);
      expect(plan).not.toMatch(/Seq Scan on handoffs/);
      expect(plan).not.toMatch(/hashed SubPlan/);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});
