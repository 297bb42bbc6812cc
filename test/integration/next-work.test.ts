import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NEXT_WORK_MANY_SQL, type HeadReservation } from '../../libs/db/handoff-sql/head-reservation.ts';
import { registerAgent } from '../../libs/handoffs/manage-agents.ts';
import { sendHandoff } from '../../libs/handoffs/send-handoff.ts';
import { countStatements } from '../support/count-statements.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * The head of an agent's queue as the worker sees it (HandoffRepository.nextWork/nextWorkAt):
 * a live turn first, else the oldest handoff that may start now, whatever the backlog.
 * Recipients are pull-only (manual), so no worker moves these handoffs behind the test's back.
 */
let baton: TestBaton;
let n = 0;
/** The deployment this Baton's workers belong to (its Redis prefix), which registered the agents. */
let mine: string;

beforeAll(async () => {
  baton = await startTestBaton();
  mine = baton.core.deployment;
  await registerAgent(baton.core, { project: 'default', handle: 'sender', provider: 'demo' });
});

afterAll(async () => {
  await baton?.stop();
});

async function agentWith(count: number): Promise<{ agentId: string; ids: string[] }> {
  const handle = `q${++n}`;
  await registerAgent(baton.core, { project: 'default', handle, provider: 'manual' });
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const { handoff } = await sendHandoff(baton.core, { project: 'default', from: 'sender', to: handle, message: `${handle} #${i}` });
    ids.push(handoff.id);
  }
  const { rows } = await baton.db.pool.query<{ id: string }>(`SELECT id FROM agents WHERE handle = $1`, [handle]);
  return { agentId: rows[0]!.id, ids };
}

/** The statement that records a turn RETURNED and reads (and, with `reserve`, reserves) the recipient's next head. */
const returnTurn = (agentId: string, id: string, from: 'RUNNING' | 'WAITING', expectRevision: number, reserve?: HeadReservation) =>
  baton.repos.handoffs.transition({
    handoffId: id,
    steps: [{ from, to: 'RETURNED', event: { event: 'turn_returned', actorKind: 'system', actorId: 'test' } }],
    expectRevision,
    at: new Date(),
    thenNextWork: { recipientId: agentId, now: new Date(), deployment: mine, ...(reserve ? { reserve } : {}) },
  });

const set = (ids: string[], sql: string, ...params: unknown[]) =>
  baton.db.pool.query(`UPDATE handoffs SET ${sql} WHERE id = ANY($1::uuid[])`, [ids, ...params]);

describe('the head of an agent queue', () => {
  it('is the oldest dispatchable handoff across WAITING, BUSY and OWNER_REJECTED, skipping ones not due yet', async () => {
    const { agentId, ids } = await agentWith(6);
    const now = new Date();
    await set([ids[0]!], `delivery_state = 'RETURNED'`);
    await set([ids[1]!], `not_before = $2`, new Date(now.getTime() + 60_000));
    await set([ids[2]!, ids[4]!], `delivery_state = 'BUSY'`);
    await set([ids[3]!], `delivery_state = 'OWNER_REJECTED'`);
    const head = await baton.repos.handoffs.nextWork(agentId, now, mine);
    expect(head?.handoff.id).toBe(ids[2]);
    expect(head?.live).toBe(false);
    expect(head?.senderHandle).toBe('sender');
    expect(head?.attempt).toBeNull();
    // Once the delayed one is due, it is the oldest again.
    expect((await baton.repos.handoffs.nextWork(agentId, new Date(now.getTime() + 61_000), mine))?.handoff.id).toBe(ids[1]);
  });

  it('puts a turn that may be live first, with its newest attempt, even behind older waiting work', async () => {
    const { agentId, ids } = await agentWith(4);
    await set([ids[3]!], `delivery_state = 'ACCEPTED', attempt_count = 2`);
    for (const number of [1, 2]) {
      await baton.db.pool.query(
        `INSERT INTO delivery_attempts (id, handoff_id, number, request_id, status, started_at) VALUES (gen_random_uuid(), $1, $2, gen_random_uuid(), 'accepted', now())`,
        [ids[3], number],
      );
    }
    const head = await baton.repos.handoffs.nextWork(agentId, new Date(), mine);
    expect(head?.handoff.id).toBe(ids[3]);
    expect(head?.live).toBe(true);
    const { rows } = await baton.db.pool.query<{ id: string }>(`SELECT id FROM delivery_attempts WHERE handoff_id = $1 AND number = 2`, [
      ids[3],
    ]);
    expect(head?.attempt?.id).toBe(rows[0]!.id);
    // A SENDING row with no attempt counted yet is not a live turn (nor dispatchable).
    await set([ids[3]!], `delivery_state = 'RETURNED'`);
    await set([ids[0]!], `delivery_state = 'SENDING', attempt_count = 0`);
    expect((await baton.repos.handoffs.nextWork(agentId, new Date(), mine))?.handoff.id).toBe(ids[1]);
  });

  it('answers nextWorkAt: now, the earliest time, or nothing', async () => {
    const { agentId, ids } = await agentWith(3);
    const now = new Date();
    expect(await baton.repos.handoffs.nextWorkAt(agentId, now, mine)).toBe('now');
    const later = new Date(now.getTime() + 30_000);
    await set(ids, `not_before = $2`, new Date(now.getTime() + 90_000));
    await set([ids[1]!], `not_before = $2`, later);
    expect(await baton.repos.handoffs.nextWork(agentId, now, mine)).toBeNull();
    expect(((await baton.repos.handoffs.nextWorkAt(agentId, now, mine)) as Date).getTime()).toBe(later.getTime());
    await set(ids, `delivery_state = 'RETURNED'`);
    expect(await baton.repos.handoffs.nextWorkAt(agentId, now, mine)).toBeNull();
  });

  it('finds the head of a deep backlog as the oldest one', async () => {
    const { agentId, ids } = await agentWith(1);
    // 2,000 more queued behind it, inserted in one statement (copies of the first).
    await baton.db.pool.query(
      `INSERT INTO handoffs (id, project_id, sender_id, recipient_id, recipient_generation, provider, message, content_hash, delivery_state, revision, created_at, updated_at)
       SELECT gen_random_uuid(), project_id, sender_id, recipient_id, recipient_generation, provider, message || g, content_hash || g, 'BUSY', 0, now(), now()
       FROM handoffs, generate_series(1, 2000) g WHERE id = $1`,
      [ids[0]],
    );
    expect((await baton.repos.handoffs.nextWork(agentId, new Date(), mine))?.handoff.id).toBe(ids[0]);
    await set([ids[0]!], `delivery_state = 'RETURNED'`);
    const next = await baton.repos.handoffs.nextWork(agentId, new Date(), mine);
    const { rows } = await baton.db.pool.query<{ id: string }>(
      `SELECT id FROM handoffs WHERE recipient_id = $1 AND delivery_state = 'BUSY' ORDER BY seq LIMIT 1`,
      [agentId],
    );
    expect(next?.handoff.id).toBe(rows[0]!.id);
  });

  it('is empty for a worker of another deployment: neither waiting work nor a live turn, and no time to come back', async () => {
    const { agentId, ids } = await agentWith(3);
    await set([ids[0]!], `delivery_state = 'SENDING', attempt_count = 1`);
    await set([ids[2]!], `not_before = $2`, new Date(Date.now() + 60_000));
    expect((await baton.repos.handoffs.nextWork(agentId, new Date(), mine))?.live, 'its own deployment follows the live turn').toBe(true);
    expect(await baton.repos.handoffs.nextWork(agentId, new Date(), `${mine}-other`)).toBeNull();
    expect(await baton.repos.handoffs.nextWorkAt(agentId, new Date(), `${mine}-other`)).toBeNull();
    await set([ids[0]!, ids[1]!], `delivery_state = 'RETURNED'`);
    expect(await baton.repos.handoffs.nextWorkAt(agentId, new Date(), mine)).toBeInstanceOf(Date);
    expect(await baton.repos.handoffs.nextWorkAt(agentId, new Date(), `${mine}-other`)).toBeNull();
  });

  it('is read by the statement that ends a turn, leaving that handoff out, exactly as a look-up after it would find it', async () => {
    const { agentId, ids } = await agentWith(3);
    // ids[0] is the live turn that ends; ids[1] waits behind it; ids[2] is not due yet.
    await set([ids[0]!], `delivery_state = 'RUNNING', attempt_count = 1`);
    await set([ids[2]!], `not_before = $2`, new Date(Date.now() + 60_000));
    const before = (await baton.repos.handoffs.findById(ids[0]!))!;
    const ended = await returnTurn(agentId, ids[0]!, 'RUNNING', before.revision);
    expect(ended?.revision).toBe(before.revision + 1);
    expect(ended?.eventIds).toHaveLength(1);
    // The ended turn is not "live" any more for the loop, although the statement's snapshot still sees it so.
    expect(ended?.nextWork?.handoff.id).toBe(ids[1]);
    expect(ended?.nextWork?.live).toBe(false);
    expect(ended?.nextWork).toEqual(await baton.repos.handoffs.nextWork(agentId, new Date(), mine));

    // The last one due ends: nothing more now (the delayed one is not due), as a look-up says too.
    const second = (await baton.repos.handoffs.findById(ids[1]!))!;
    const last = await returnTurn(agentId, ids[1]!, 'WAITING', second.revision);
    expect(last?.nextWork).toBeNull();
    expect(await baton.repos.handoffs.nextWork(agentId, new Date(), mine)).toBeNull();
    // Another deployment's worker learns nothing from it either, though work is due.
    const foreign = await agentWith(2);
    const head = (await baton.repos.handoffs.findById(foreign.ids[0]!))!;
    const other = await baton.repos.handoffs.transition({
      handoffId: foreign.ids[0]!,
      steps: [{ from: 'WAITING', to: 'RETURNED', event: { event: 'turn_returned', actorKind: 'system', actorId: 'test' } }],
      expectRevision: head.revision,
      at: new Date(),
      thenNextWork: { recipientId: foreign.agentId, now: new Date(), deployment: `${mine}-other` },
    });
    expect(other?.revision).toBe(head.revision + 1);
    expect(other?.nextWork).toBeNull();
  });
});

/**
 * The statement that reads the head of an agent's queue reserving its attempt too
 * (HeadReservation): exactly what a separate reservation writes, and only for a head that needs
 * no check in between.
 */
const row = async (id: string) =>
  (
    await baton.db.pool.query(`SELECT delivery_state, revision, attempt_count, not_before, delivery_detail FROM handoffs WHERE id = $1`, [
      id,
    ])
  ).rows[0];

/** What HeadReserver passes for an open and a restricted project (holdReason per rule). */
const OPEN = { none: true, rules: ['allow'] };
const RESTRICTED = { none: false, rules: ['allow'] };

function spec(over: Partial<HeadReservation> = {}): HeadReservation {
  return {
    attemptId: randomUUID(),
    requestId: randomUUID(),
    workerId: 'test-worker',
    fence: 1_000n + BigInt(++n),
    provider: 'manual',
    // An open project: no rule or an allow passes, a block does not.
    passing: OPEN,
    to: 'SENDING',
    queued: { to: 'BUSY', event: 'recipient_busy', reason: 'another turn of the recipient is in progress' },
    queuedBusy: false,
    ...over,
  };
}

describe('the look-up of the head, reserving it', () => {
  it('reserves a WAITING head exactly as the reservation move does: SENDING, the attempt with its fence, the event, the rest made BUSY', async () => {
    const { agentId, ids } = await agentWith(3);
    await set([ids[0]!], `not_before = now() - interval '1 minute', delivery_detail = 'was waiting'`);
    const before = await row(ids[0]!);
    const r = spec();
    const head = await baton.repos.handoffs.nextWork(agentId, new Date(), mine, r);
    expect(head?.handoff.id).toBe(ids[0]);
    expect(head?.handoff.deliveryState).toBe('WAITING');
    expect(head?.reserved).toMatchObject({ revision: before.revision + 1, attemptId: r.attemptId, requestId: r.requestId });
    expect(await row(ids[0]!)).toMatchObject({
      delivery_state: 'SENDING',
      revision: before.revision + 1,
      attempt_count: 1,
      not_before: null,
      delivery_detail: null,
    });
    const attempts = (
      await baton.db.pool.query(`SELECT id, number, request_id, status, worker_id, fence FROM delivery_attempts WHERE handoff_id = $1`, [
        ids[0],
      ])
    ).rows;
    expect(attempts).toEqual([
      { id: r.attemptId, number: 1, request_id: r.requestId, status: 'sending', worker_id: 'test-worker', fence: r.fence },
    ]);
    expect((await baton.db.pool.query(`SELECT fence FROM agent_turn_fences WHERE agent_id = $1`, [agentId])).rows[0]?.fence).toBe(r.fence);
    const events = (
      await baton.db.pool.query(
        `SELECT id::text, handoff_id, from_state, to_state, event, actor_kind, actor_id, reason, detail, attempt_id FROM handoff_events WHERE handoff_id = ANY($1::uuid[]) AND event <> 'enrolled' ORDER BY id`,
        [ids],
      )
    ).rows;
    expect(events.map((e) => [e.handoff_id, e.from_state, e.to_state, e.event])).toEqual([
      [ids[0], 'WAITING', 'SENDING', 'attempt_reserved'],
      [ids[1], 'WAITING', 'BUSY', 'recipient_busy'],
      [ids[2], 'WAITING', 'BUSY', 'recipient_busy'],
    ]);
    expect(events[0]).toMatchObject({
      actor_kind: 'system',
      actor_id: 'test-worker',
      reason: 'attempt 1',
      detail: { requestId: r.requestId },
      attempt_id: r.attemptId,
    });
    expect(events[1]).toMatchObject({ actor_id: 'test-worker', reason: 'another turn of the recipient is in progress' });
    expect([...head!.reserved!.eventIds].sort()).toEqual(events.map((e) => e.id).sort());
  });

  it('reserves a head that is BUSY only because it queued behind an earlier turn right after that turn ended, never one that got a busy answer', async () => {
    const queued = await agentWith(1);
    await set(queued.ids, `delivery_state = 'BUSY'`);
    // A plain look-up leaves it to deliver, which asks the session first.
    expect((await baton.repos.handoffs.nextWork(queued.agentId, new Date(), mine, spec()))?.reserved).toBeUndefined();
    expect((await row(queued.ids[0]!)).delivery_state).toBe('BUSY');
    expect((await baton.repos.handoffs.nextWork(queued.agentId, new Date(), mine, spec({ queuedBusy: true })))?.reserved).toBeDefined();
    const answered = await agentWith(1);
    await set(answered.ids, `delivery_state = 'BUSY', not_before = now() - interval '1 second'`);
    const head = await baton.repos.handoffs.nextWork(answered.agentId, new Date(), mine, spec({ queuedBusy: true }));
    expect(head?.handoff.id).toBe(answered.ids[0]);
    expect(head?.reserved).toBeUndefined();
    expect((await row(answered.ids[0]!)).delivery_state).toBe('BUSY');
  });

  it('leaves every head that needs a check alone, writing nothing: live, refused before, another registration or provider, a held connection, an older fence', async () => {
    const cases: Array<[string, (a: { agentId: string; ids: string[] }) => Promise<unknown>, Partial<HeadReservation>?]> = [
      ['a live turn', (a) => set([a.ids[0]!], `delivery_state = 'RUNNING', attempt_count = 1`)],
      ['refused before', (a) => set([a.ids[0]!], `delivery_state = 'OWNER_REJECTED'`)],
      ['another registration', (a) => baton.db.pool.query(`UPDATE agents SET generation = generation + 1 WHERE id = $1`, [a.agentId])],
      ['another provider', async () => undefined, { provider: 'demo' }],
      [
        'a blocked connection',
        (a) =>
          baton.db.pool.query(
            `INSERT INTO connections (id, project_id, from_id, to_id, rule, updated_at) SELECT gen_random_uuid(), project_id, sender_id, recipient_id, 'block', now() FROM handoffs WHERE id = $1`,
            [a.ids[0]],
          ),
      ],
      ['restricted, no allow', async () => undefined, { passing: RESTRICTED }],
      [
        'an older fence',
        (a) => baton.db.pool.query(`INSERT INTO agent_turn_fences (agent_id, fence) VALUES ($1, 9000000000000000000)`, [a.agentId]),
      ],
    ];
    for (const [what, arrange, over] of cases) {
      const a = await agentWith(2);
      await arrange(a);
      const before = await row(a.ids[0]!);
      const head = await baton.repos.handoffs.nextWork(a.agentId, new Date(), mine, spec(over));
      expect(head?.reserved, what).toBeUndefined();
      expect(await row(a.ids[0]!), what).toEqual(before);
      expect((await row(a.ids[1]!)).delivery_state, what).toBe('WAITING');
    }
    // An explicit allow passes a restricted project.
    const allowed = await agentWith(1);
    await baton.db.pool.query(
      `INSERT INTO connections (id, project_id, from_id, to_id, rule, updated_at) SELECT gen_random_uuid(), project_id, sender_id, recipient_id, 'allow', now() FROM handoffs WHERE id = $1`,
      [allowed.ids[0]],
    );
    expect((await baton.repos.handoffs.nextWork(allowed.agentId, new Date(), mine, spec({ passing: RESTRICTED })))?.reserved).toBeDefined();
  });

  it('made by many agents at once, shares statements: each agent gets its own head and reservation, and those needing a check are left alone', async () => {
    const statements = countStatements(baton.db.pool, NEXT_WORK_MANY_SQL);
    const good = await Promise.all(Array.from({ length: 6 }, () => agentWith(2)));
    const live = await agentWith(2);
    await set([live.ids[0]!], `delivery_state = 'RUNNING', attempt_count = 1`);
    const fenced = await agentWith(2);
    await baton.db.pool.query(`INSERT INTO agent_turn_fences (agent_id, fence) VALUES ($1, 9000000000000000000)`, [fenced.agentId]);
    const empty = await agentWith(0);
    const all = [...good, live, fenced, empty];
    const specs = all.map(() => spec());
    const before = statements.count();
    const heads = await Promise.all(all.map((a, i) => baton.repos.handoffs.nextWork(a.agentId, new Date(), mine, specs[i])));
    const used = statements.count() - before;
    expect(used).toBeGreaterThan(0);
    expect(used).toBeLessThan(all.length);
    for (const [i, a] of good.entries()) {
      expect(heads[i]?.handoff.id).toBe(a.ids[0]);
      expect(heads[i]?.reserved).toMatchObject({ attemptId: specs[i]!.attemptId, requestId: specs[i]!.requestId });
      expect((await row(a.ids[0]!)).delivery_state).toBe('SENDING');
      expect((await row(a.ids[1]!)).delivery_state).toBe('BUSY');
      // Its own events only: its reservation and its own queue's wait.
      const events = (
        await baton.db.pool.query(`SELECT id::text FROM handoff_events WHERE handoff_id = ANY($1::uuid[]) AND event <> 'enrolled'`, [a.ids])
      ).rows;
      expect([...heads[i]!.reserved!.eventIds].sort()).toEqual(events.map((e) => e.id).sort());
      const attempts = (await baton.db.pool.query(`SELECT id, fence FROM delivery_attempts WHERE handoff_id = $1`, [a.ids[0]])).rows;
      expect(attempts).toEqual([{ id: specs[i]!.attemptId, fence: specs[i]!.fence }]);
    }
    const at = (a: { agentId: string }) => heads[all.indexOf(a as (typeof all)[number])];
    expect(at(live)?.live).toBe(true);
    expect(at(live)?.reserved).toBeUndefined();
    expect(at(fenced)?.handoff.id).toBe(fenced.ids[0]);
    expect(at(fenced)?.reserved).toBeUndefined();
    expect((await row(fenced.ids[0]!)).delivery_state).toBe('WAITING');
    expect(at(empty)).toBeNull();
    statements.stop();
  });

  it('made together, are planned as per-agent index probes (a generic plan, thousands of agents and open handoffs: no scan of either table)', async () => {
    await baton.db.pool.query(
      `INSERT INTO agents (id, project_id, handle, display_name, provider, deployment)
       SELECT gen_random_uuid(), p.id, 'np' || g, 'np' || g, 'manual', $1 FROM projects p, generate_series(1, 3000) g WHERE p.slug = 'default'`,
      [mine],
    );
    await baton.db.pool.query(
      `INSERT INTO handoffs (id, project_id, sender_id, recipient_id, recipient_generation, provider, message, content_hash, delivery_state, revision, created_at, updated_at)
       SELECT gen_random_uuid(), a.project_id, a.id, a.id, 1, 'manual', 'm', md5(a.handle), 'WAITING', 0, now(), now() FROM agents a WHERE a.handle LIKE 'np%'`,
    );
    await baton.db.pool.query('ANALYZE agents');
    await baton.db.pool.query('ANALYZE handoffs');
    const { rows: agents } = await baton.db.pool.query<{ id: string }>(`SELECT id FROM agents WHERE handle LIKE 'np%' LIMIT 2`);
    const input = agents.map((a, n) => {
      const r = spec();
      return {
        n,
        recipient: a.id,
        now: new Date(),
        deployment: mine,
        attempt_id: r.attemptId,
        request_id: r.requestId,
        worker_id: r.workerId,
        fence: r.fence.toString(),
        provider: r.provider,
        queued_busy: false,
        passing_none: true,
        passing_rules: ['allow'],
        to_state: 'SENDING',
        queued_to: 'BUSY',
        queued_event: 'recipient_busy',
        queued_reason: 'r',
      };
    });
    const client = await baton.db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${NEXT_WORK_MANY_SQL}`, [JSON.stringify(input)]);
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).toMatch(/Index Scan using handoffs_recipient_id_delivery_state_seq_idx/);
      expect(plan).not.toMatch(/Seq Scan on agents/);
      expect(plan).not.toMatch(/Seq Scan on handoffs/);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it('says when another handoff of the recipient is UNCERTAIN, and reserves nothing then (that turn may still be running)', async () => {
    const { agentId, ids } = await agentWith(2);
    expect((await baton.repos.handoffs.nextWork(agentId, new Date(), mine))?.uncertainTurn).toBe(false);
    await set([ids[0]!], `delivery_state = 'UNCERTAIN', attempt_count = 1`);
    const head = await baton.repos.handoffs.nextWork(agentId, new Date(), mine, spec());
    expect(head?.handoff.id).toBe(ids[1]);
    expect(head?.uncertainTurn).toBe(true);
    expect(head?.reserved).toBeUndefined();
    expect((await row(ids[1]!)).delivery_state).toBe('WAITING');
  });

  it("is done for the ends of many agents' turns in shared statements, each end and reservation as if alone", async () => {
    const batched = countStatements(baton.db.pool, (sql) => sql.startsWith('WITH x AS (SELECT * FROM jsonb_to_recordset'));
    const alone = countStatements(baton.db.pool, (sql) => sql.startsWith('WITH before AS'));
    // Six agents, each ending a live turn with two more queued behind it; one with nothing
    // behind it; one whose end is stale (nothing written, nothing reserved); one whose end
    // carries a value Postgres refuses (it alone fails); two ends of one agent (never in the
    // same statement: both see that agent's queue).
    const agents = await Promise.all(Array.from({ length: 6 }, () => agentWith(3)));
    const lone = await agentWith(1);
    const stale = await agentWith(2);
    const bad = await agentWith(2);
    const also = await agentWith(2);
    const twice = await agentWith(3);
    const all = [...agents, lone, stale, bad, also];
    await set(
      all.map((a) => a.ids[0]!),
      `delivery_state = 'RUNNING', attempt_count = 1`,
    );
    await set(
      all.flatMap((a) => a.ids.slice(1)),
      `delivery_state = 'BUSY'`,
    );
    await set(twice.ids.slice(0, 2), `delivery_state = 'RUNNING', attempt_count = 1`);
    const revisions = await Promise.all([...all, twice].map(async (a) => (await baton.repos.handoffs.findById(a.ids[0]!))!.revision));
    const twiceSecond = (await baton.repos.handoffs.findById(twice.ids[1]!))!.revision;
    const specs = all.map(() => spec({ queuedBusy: true }));
    const end = (
      a: { agentId: string; ids: string[] },
      i: number,
      over: { id?: string; revision?: number; actorKind?: string; reserve?: HeadReservation } = {},
    ) =>
      baton.repos.handoffs.transition({
        handoffId: over.id ?? a.ids[0]!,
        steps: [
          {
            from: 'RUNNING',
            to: 'RETURNED',
            event: { event: 'turn_returned', actorKind: (over.actorKind ?? 'system') as 'system', actorId: `w${i}` },
          },
        ],
        expectRevision: over.revision ?? revisions[i]!,
        at: new Date(),
        patch: { resultSummary: `done ${i}` },
        thenNextWork: { recipientId: a.agentId, now: new Date(), deployment: mine, reserve: over.reserve ?? specs[i]! },
      });
    const ends = await Promise.allSettled([
      ...agents.map((a, i) => end(a, i)),
      end(lone, agents.length),
      end(stale, agents.length + 1, { revision: revisions[agents.length + 1]! - 1 }),
      end(twice, all.length, { revision: revisions[all.length]!, reserve: spec({ queuedBusy: true }) }),
      end(twice, all.length, { id: twice.ids[1]!, revision: twiceSecond, reserve: spec({ queuedBusy: true }) }),
    ]);
    // Fewer statements than ends: they were shared.
    expect(batched.count()).toBeGreaterThan(0);
    expect(batched.count() + alone.count()).toBeLessThan(ends.length);
    const value = (i: number) => (ends[i]!.status === 'fulfilled' ? ends[i]!.value : undefined);
    for (const [i, a] of agents.entries()) {
      const ended = value(i);
      expect(ended?.revision).toBe(revisions[i]! + 1);
      expect(await row(a.ids[0]!)).toMatchObject({ delivery_state: 'RETURNED', revision: revisions[i]! + 1 });
      expect((await baton.repos.handoffs.findById(a.ids[0]!))?.resultSummary).toBe(`done ${i}`);
      // Its own end's event only, and its own next head reserved with its own attempt.
      const own = (
        await baton.db.pool.query(`SELECT id::text, actor_id FROM handoff_events WHERE handoff_id = $1 AND event = 'turn_returned'`, [
          a.ids[0],
        ])
      ).rows;
      expect(own).toEqual([{ id: ended!.eventIds[0], actor_id: `w${i}` }]);
      expect(ended?.eventIds).toHaveLength(1);
      expect(ended?.nextWork?.handoff.id).toBe(a.ids[1]);
      expect(ended?.nextWork?.reserved).toMatchObject({ attemptId: specs[i]!.attemptId, requestId: specs[i]!.requestId });
      expect(await row(a.ids[1]!)).toMatchObject({ delivery_state: 'SENDING', attempt_count: 1 });
      expect((await row(a.ids[2]!)).delivery_state).toBe('BUSY');
      const attempts = (await baton.db.pool.query(`SELECT id, fence FROM delivery_attempts WHERE handoff_id = $1`, [a.ids[1]])).rows;
      expect(attempts).toEqual([{ id: specs[i]!.attemptId, fence: specs[i]!.fence }]);
      const reservedEvents = (
        await baton.db.pool.query(`SELECT id::text FROM handoff_events WHERE handoff_id = $1 AND event = 'attempt_reserved'`, [a.ids[1]])
      ).rows;
      expect(ended?.nextWork?.reserved?.eventIds).toEqual(reservedEvents.map((e) => e.id));
    }
    expect(value(agents.length)).toMatchObject({ revision: revisions[agents.length]! + 1, nextWork: null });
    expect(value(agents.length + 1)).toBeNull();
    expect(await row(stale.ids[0]!)).toMatchObject({ delivery_state: 'RUNNING' });
    expect((await row(stale.ids[1]!)).delivery_state).toBe('BUSY');
    expect(value(agents.length + 2)?.revision).toBeGreaterThan(0);
    expect(value(agents.length + 3)?.revision).toBeGreaterThan(0);
    expect((await row(twice.ids[0]!)).delivery_state).toBe('RETURNED');
    expect((await row(twice.ids[1]!)).delivery_state).toBe('RETURNED');

    // A value Postgres refuses fails its own end only: the statement it shared is run again, one end at a time.
    const [refused, fine] = await Promise.allSettled([end(bad, agents.length + 2, { actorKind: 'nobody' }), end(also, agents.length + 3)]);
    expect(refused.status).toBe('rejected');
    expect((await row(bad.ids[0]!)).delivery_state).toBe('RUNNING');
    expect((await row(bad.ids[1]!)).delivery_state).toBe('BUSY');
    expect(fine.status === 'fulfilled' ? fine.value?.nextWork?.handoff.id : undefined).toBe(also.ids[1]);
    expect(await row(also.ids[1]!)).toMatchObject({ delivery_state: 'SENDING', attempt_count: 1 });
    batched.stop();
    alone.stop();
  });

  it('shares a statement for ends of every shape a write can take, each written as alone', async () => {
    const batched = countStatements(baton.db.pool, (sql) => sql.startsWith('WITH x AS (SELECT * FROM jsonb_to_recordset'));
    const alone = countStatements(baton.db.pool, (sql) => sql.startsWith('WITH before AS'));
    // Two agents, each ending a live turn with every option of a write at once (a patch of every
    // kind, a counter, the attempt's update, the queue moved, the work returned), one WAITING behind it.
    const pair = await Promise.all([agentWith(2), agentWith(2)]);
    await set(
      pair.map((a) => a.ids[0]!),
      `delivery_state = 'RUNNING', attempt_count = 1, work_state = 'open'`,
    );
    const attempts = pair.map(() => randomUUID());
    for (const [i, a] of pair.entries()) {
      await baton.db.pool.query(
        `INSERT INTO delivery_attempts (id, handoff_id, number, request_id, status, started_at) VALUES ($1, $2, 1, $3, 'running', now())`,
        [attempts[i], a.ids[0], randomUUID()],
      );
    }
    const revisions = await Promise.all(pair.map(async (a) => (await baton.repos.handoffs.findById(a.ids[0]!))!.revision));
    const at = new Date();
    const ends = await Promise.all(
      pair.map((a, i) =>
        baton.repos.handoffs.transition({
          handoffId: a.ids[0]!,
          steps: [
            { from: 'RUNNING', to: 'RETURNED', event: { event: 'turn_returned', actorKind: 'system', actorId: `w${i}`, detail: { n: i } } },
          ],
          expectRevision: revisions[i]!,
          at,
          patch: {
            resultSummary: `sum ${i}`,
            result: { n: i },
            settledAt: at,
            inProgressKey: null,
            deliveryDetail: `d ${i}`,
            notBefore: null,
          },
          increment: ['refusals'],
          updateAttempt: {
            id: attempts[i]!,
            status: 'returned',
            error: `e ${i}`,
            accepted: true,
            finished: true,
            observed: true,
            absentScan: true,
          },
          moveOthers: {
            recipientId: a.agentId,
            from: 'WAITING',
            to: 'BUSY',
            event: { event: 'recipient_busy', actorKind: 'system', actorId: `w${i}`, reason: 'r' },
          },
          moveWork: {
            from: ['open'],
            to: 'returned',
            event: { event: 'work_returned', actorKind: 'system', actorId: `w${i}`, reason: null },
            result: 'succeeded',
          },
          thenNextWork: { recipientId: a.agentId, now: at, deployment: mine },
        }),
      ),
    );
    // One shared statement, and none run again alone (a statement Postgres refused would be).
    expect(batched.count()).toBe(1);
    expect(alone.count()).toBe(0);
    for (const [i, a] of pair.entries()) {
      expect(ends[i]?.revision).toBe(revisions[i]! + 1);
      const h = (await baton.repos.handoffs.findById(a.ids[0]!))!;
      expect(h).toMatchObject({
        deliveryState: 'RETURNED',
        resultSummary: `sum ${i}`,
        result: { n: i },
        deliveryDetail: `d ${i}`,
        refusals: 1,
        workState: 'returned',
        returnOutcome: 'succeeded',
      });
      const attempt = (
        await baton.db.pool.query(
          `SELECT status, error, absent_scans, finished_at IS NOT NULL AS finished FROM delivery_attempts WHERE id = $1`,
          [attempts[i]],
        )
      ).rows[0];
      expect(attempt).toEqual({ status: 'returned', error: `e ${i}`, absent_scans: 1, finished: true });
      expect((await row(a.ids[1]!)).delivery_state).toBe('BUSY');
      // Its own events, in id order (numeric: 9 before 10): the end, the work's move, the queued one's wait.
      const events = (
        await baton.db.pool.query(
          `SELECT e.id::text AS id, e.event, e.actor_id FROM handoff_events e WHERE e.handoff_id = ANY($1::uuid[]) AND e.event <> 'enrolled' ORDER BY e.id`,
          [a.ids],
        )
      ).rows;
      expect(events.map((e) => e.event).sort()).toEqual(['recipient_busy', 'turn_returned', 'work_returned']);
      expect(events.every((e) => e.actor_id === `w${i}`)).toBe(true);
      expect(ends[i]?.eventIds).toEqual(events.map((e) => e.id));
      // The head after it: the one moved to BUSY, as a look-up would find it.
      expect(ends[i]?.nextWork?.handoff.id).toBe(a.ids[1]);
    }
    batched.stop();
    alone.stop();
  });

  it('is done by the statement that ends a turn, for the next head, only when that end commits', async () => {
    const { agentId, ids } = await agentWith(3);
    await set([ids[0]!], `delivery_state = 'RUNNING', attempt_count = 1`);
    await set([ids[1]!, ids[2]!], `delivery_state = 'BUSY'`);
    const before = (await baton.repos.handoffs.findById(ids[0]!))!;
    const end = (expectRevision: number, r: HeadReservation) => returnTurn(agentId, ids[0]!, 'RUNNING', expectRevision, r);
    // A stale end writes nothing at all: no end, no reservation.
    expect(await end(before.revision - 1, spec())).toBeNull();
    expect((await row(ids[1]!)).delivery_state).toBe('BUSY');
    const r = spec({ queuedBusy: true });
    const ended = await end(before.revision, r);
    expect(ended?.nextWork?.handoff.id).toBe(ids[1]);
    expect(ended?.nextWork?.reserved?.requestId).toBe(r.requestId);
    expect((await row(ids[0]!)).delivery_state).toBe('RETURNED');
    expect(await row(ids[1]!)).toMatchObject({ delivery_state: 'SENDING', attempt_count: 1 });
    expect((await row(ids[2]!)).delivery_state).toBe('BUSY');
  });
});
