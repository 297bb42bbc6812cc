import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../libs/domain/clock.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/** Pull receivers (provider manual) and the work contract, against real Postgres. */
let baton: TestBaton;
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
let n = 0;

async function agents(...ids: string[]) {
  for (const id of ids) expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
}

async function work(from: string, to: string, extra: Record<string, unknown> = {}) {
  const res = await baton.post('/v1/handoffs', { from, to, title: `task ${++n}`, message: `do task ${n}`, ...extra });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

const get = async (id: string) => (await baton.get(`/v1/handoffs/${id}`)).body;
const accept = (id: string, as: string, body: Record<string, unknown> = {}) => baton.post(`/v1/handoffs/${id}/accept`, { as, ...body });
const ret = (id: string, body: Record<string, unknown>) => baton.post(`/v1/handoffs/${id}/return`, body);
const close = (id: string, body: Record<string, unknown>) => baton.post(`/v1/handoffs/${id}/close`, body);

async function counts(id: string) {
  const { rows } = await baton.db.pool.query<{ e: number; rev: number; wrev: number }>(
    'SELECT (SELECT count(*)::int FROM handoff_events WHERE handoff_id = $1) AS e, revision AS rev, work_revision AS wrev FROM handoffs WHERE id = $1',
    [id],
  );
  return rows[0];
}

beforeAll(async () => {
  baton = await startTestBaton({ clock });
  baton.startWorker();
  await agents('lead', 'dev', 'dev2', 'dev3', 'outsider');
  // Another project, to prove scope.
  await baton.db.pool.query(
    `INSERT INTO projects (id, workspace_id, slug, name) SELECT gen_random_uuid(), id, 'other', 'Other' FROM workspaces WHERE slug = 'default'`,
  );
  expect((await baton.post('/v1/agents', { id: 'stranger', provider: 'manual' }, { 'x-baton-project': 'other' })).status).toBe(201);
});

afterAll(async () => {
  await baton?.stop();
});

describe('exactly-once claims', () => {
  it('100 concurrent accepts of unowned work: exactly one wins, the rest get already_claimed, and the winner is untouched', async () => {
    const racers = Array.from({ length: 100 }, (_, i) => `racer${i}`);
    for (const id of racers) await baton.post('/v1/agents', { id, provider: 'manual' });
    const id = await work('lead', '@project');
    const results = await Promise.all(racers.map((as) => accept(id, as)));
    const winners = results.filter((r) => r.status === 200);
    expect(winners).toHaveLength(1);
    const losers = results.filter((r) => r.status !== 200);
    expect(losers).toHaveLength(99);
    for (const l of losers) {
      expect(l.status).toBe(409);
      expect(l.body.error.code).toBe('already_claimed');
    }
    const winner = winners[0]!.body;
    expect(winner.claim).toMatchObject({ attempt: 1 });
    const h = await get(id);
    expect(h.work).toMatchObject({ state: 'claimed', attempt: 1, claimedBy: winner.handoff.work.claimedBy });
    expect(h.events.filter((e: any) => e.event === 'claimed' && e.workTo === 'claimed')).toHaveLength(1);
  });

  it('owned work can be claimed only by its recipient; another agent, of this project or another, cannot even see it', async () => {
    const id = await work('lead', 'dev');
    // dev2 with its own token (the test's admin token sent the work, so the admin may see it).
    const wrong = await baton.post(`/v1/handoffs/${id}/accept`, {}, { authorization: `Bearer ${await baton.tokenFor('dev2')}` });
    expect(wrong.status).toBe(404);
    expect(wrong.body.error.code).toBe('handoff_not_found');
    const foreign = await baton.post(`/v1/handoffs/${id}/accept`, { as: 'stranger' }, { 'x-baton-project': 'other' });
    expect(foreign.status).toBe(404);
    expect((await accept(id, 'dev')).status).toBe(200);
  });

  it('a replayed accept by the claimant answers the same claim with recovered: true', async () => {
    const id = await work('lead', 'dev');
    const first = await accept(id, 'dev');
    const again = await accept(id, 'dev');
    expect(again.status).toBe(200);
    expect(again.body.recovered).toBe(true);
    expect(again.body.claim.token).toBe(first.body.claim.token);
    expect(again.body.claim.attempt).toBe(1);
  });

  it('a plain message has no work to claim', async () => {
    const msg = await baton.post('/v1/handoffs', { from: 'lead', to: 'dev', message: 'fyi' });
    expect((await accept(msg.body.id, 'dev')).body.error.code).toBe('not_work');
  });
});

describe('returns', () => {
  it('replaying the same return is idempotent (recovered: true); the same claim with a different body is a conflict and changes nothing', async () => {
    const id = await work('lead', 'dev');
    const claim = (await accept(id, 'dev')).body.claim;
    const body = { as: 'dev', claimToken: claim.token, summary: 'done: see PR 12' };
    const first = await ret(id, body);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ recovered: false, handoff: { workState: 'returned', state: 'RETURNED' } });
    const before = await counts(id);
    const replay = await ret(id, body);
    expect(replay.status).toBe(200);
    expect(replay.body.recovered).toBe(true);
    const conflict = await ret(id, { ...body, summary: 'something else' });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('replay_conflict');
    expect(await counts(id)).toEqual(before);
  });

  it('a writer holding a stale revision gets 409 stale_revision and changes nothing', async () => {
    const id = await work('lead', 'dev');
    const c = (await accept(id, 'dev')).body;
    const before = await counts(id);
    const stale = await ret(id, { as: 'dev', claimToken: c.claim.token, revision: c.handoff.work.revision - 1, summary: 'x' });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('stale_revision');
    expect(await counts(id)).toEqual(before);
    expect((await ret(id, { as: 'dev', claimToken: c.claim.token, revision: c.handoff.work.revision, summary: 'x' })).status).toBe(200);
  });

  it('a failed return frees the work for a new claim (attempt + 1)', async () => {
    const id = await work('lead', '@project');
    const c1 = (await accept(id, 'dev')).body.claim;
    const failed = await ret(id, { as: 'dev', claimToken: c1.token, summary: 'could not build it', outcome: 'failed' });
    expect(failed.body.handoff).toMatchObject({ workState: 'open', state: 'WAITING', work: { returnOutcome: 'failed' } });
    const c2 = (await accept(id, 'dev2')).body.claim;
    expect(c2.attempt).toBe(2);
    // The old claim is over: it can neither heartbeat nor return anything new.
    expect((await baton.post(`/v1/handoffs/${id}/heartbeat`, { as: 'dev', claimToken: c1.token })).body.error.code).toBe('claim_lost');
    expect((await ret(id, { as: 'dev', claimToken: c1.token, summary: 'late' })).body.error.code).toBe('replay_conflict');
    expect((await get(id)).work).toMatchObject({ state: 'claimed', claimedBy: 'dev2', attempt: 2 });
  });

  it("a new claim clears the previous attempt's outcome and result, which stay in the timeline", async () => {
    const id = await work('lead', '@project');
    const c1 = (await accept(id, 'dev')).body.claim;
    await ret(id, { as: 'dev', claimToken: c1.token, summary: 'could not build it', outcome: 'failed' });
    const c2 = await accept(id, 'dev2');
    expect(c2.status).toBe(200);
    const h = await get(id);
    for (const shown of [c2.body.handoff, h]) {
      expect(shown.work).toMatchObject({
        state: 'claimed',
        claimedBy: 'dev2',
        attempt: 2,
        returnOutcome: null,
        returnedAt: null,
        resultFactIds: [],
      });
      expect(shown.result).toBeNull();
    }
    // The first attempt's result is history: its return event keeps the outcome and summary.
    const failed = h.events.find((e: any) => e.event === 'return_failed');
    expect(failed).toMatchObject({ workFrom: 'claimed', workTo: 'open', detail: { outcome: 'failed', summary: 'could not build it' } });
    // Same after a succeeded return sent back for a revision.
    const owned = await work('lead', 'dev');
    const r1 = (await accept(owned, 'dev')).body.claim;
    await ret(owned, { as: 'dev', claimToken: r1.token, summary: 'first try' });
    await close(owned, { as: 'lead', resolution: 'revision', note: 'again' });
    const again = (await accept(owned, 'dev')).body.handoff;
    expect(again.work).toMatchObject({ state: 'claimed', attempt: 2, returnOutcome: null, returnedAt: null });
    expect(again.result).toBeNull();
  });

  it('lease expiry hands the work on with attempt + 1 and fences the old claimant out of heartbeat and return', async () => {
    const id = await work('lead', '@project');
    const old = (await accept(id, 'dev', { leaseSeconds: 60 })).body.claim;
    clock.advance(30_000);
    const hb = await baton.post(`/v1/handoffs/${id}/heartbeat`, { as: 'dev', claimToken: old.token, leaseSeconds: 60 });
    expect(hb.status).toBe(200);
    clock.advance(61_000);
    await baton.reconcile();
    const h = await get(id);
    expect(h.work).toMatchObject({ state: 'open', claimedBy: null });
    expect(h.events.slice(-2).map((e: any) => [e.event, e.workFrom, e.workTo, e.to])).toEqual([
      ['lease_expired', 'claimed', 'open', 'ACCEPTED'],
      ['claim_released', null, null, 'WAITING'],
    ]);
    const late = await baton.post(`/v1/handoffs/${id}/heartbeat`, { as: 'dev', claimToken: old.token });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('claim_lost');
    expect((await ret(id, { as: 'dev', claimToken: old.token, summary: 'too late' })).body.error.code).toBe('claim_lost');
    const next = (await accept(id, 'dev3')).body.claim;
    expect(next.attempt).toBe(2);
  });
});

describe('closing', () => {
  it('revision round trip: back to the recipient with a note (same handoff, attempt + 1), then accepted', async () => {
    const id = await work('lead', 'dev');
    const c1 = (await accept(id, 'dev')).body.claim;
    await ret(id, { as: 'dev', claimToken: c1.token, summary: 'first try' });
    const rev = await close(id, { as: 'lead', resolution: 'revision', note: 'add tests' });
    expect(rev.status).toBe(200);
    expect(rev.body).toMatchObject({ workState: 'open', state: 'WAITING', work: { note: 'add tests' } });
    const c2 = (await accept(id, 'dev')).body;
    expect(c2.claim.attempt).toBe(2);
    expect(c2.packet.text).toContain('Revision requested: add tests');
    await ret(id, { as: 'dev', claimToken: c2.claim.token, summary: 'second try, with tests' });
    const done = await close(id, { as: 'lead', resolution: 'accepted' });
    expect(done.body).toMatchObject({ workState: 'closed', work: { resolution: 'accepted' } });
    expect((await close(id, { as: 'lead', resolution: 'accepted' })).body.error.code).toBe('invalid_transition');
  });

  it('only the sender closes; blocked closes it too', async () => {
    const id = await work('lead', 'dev');
    const c = (await accept(id, 'dev')).body.claim;
    await ret(id, { as: 'dev', claimToken: c.token, summary: 'partial' });
    const notMine = await close(id, { as: 'dev', resolution: 'accepted' });
    expect(notMine.status).toBe(403);
    expect(notMine.body.error.code).toBe('not_sender');
    expect((await close(id, { as: 'lead', resolution: 'blocked', note: 'waiting on infra' })).body.work).toMatchObject({
      resolution: 'blocked',
    });
  });

  it('cancel by the sender; refused for anyone else', async () => {
    const id = await work('lead', 'dev');
    const refused = await baton.post(`/v1/handoffs/${id}/cancel`, { as: 'dev' });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('not_sender');
    const ok = await baton.post(`/v1/handoffs/${id}/cancel`, { as: 'lead' });
    expect(ok.body).toMatchObject({ workState: 'cancelled', state: 'CANCELLED' });
    expect((await accept(id, 'dev')).status).toBe(409);
  });
});

describe('a delivery that ends settles its work', () => {
  const lanes = async (agent: string) =>
    (Object.values((await baton.get(`/v1/board?agent=${agent}`)).body).flat() as any[]).map((c) => c.handoff.id);

  it('releasing a RUNNING pushed turn cancels its work: off the board and not claimable', async () => {
    expect((await baton.post('/v1/agents', { id: 'hanger', provider: 'demo', settings: { behavior: 'hang' } })).status).toBe(201);
    const id = await work('lead', 'hanger');
    await waitForState(baton, id, 'RUNNING');
    const released = await baton.post(`/v1/handoffs/${id}/release`, { as: 'lead', reason: 'the session crashed' });
    expect(released.body).toMatchObject({ state: 'CANCELLED', workState: 'cancelled' });
    expect(await lanes('hanger')).not.toContain(id);
    const claim = await accept(id, 'hanger');
    expect(claim.status).toBe(409);
    expect(claim.body.error.code).toBe('invalid_transition');
    const h = await get(id);
    expect(h.events.slice(-2).map((e: any) => [e.event, e.to, e.workFrom, e.workTo])).toEqual([
      ['released', 'CANCELLED', null, null],
      ['cancelled', 'CANCELLED', 'open', 'cancelled'],
    ]);
  });

  it('releasing a pull claim cancels the work: the claimant is fenced out and nobody else can claim it', async () => {
    const id = await work('lead', '@project');
    const c = (await accept(id, 'dev')).body.claim;
    const released = await baton.post(`/v1/handoffs/${id}/release`, { reason: 'done elsewhere' });
    expect(released.body).toMatchObject({ state: 'CANCELLED', workState: 'cancelled' });
    expect((await accept(id, 'dev2')).status).toBe(409);
    expect((await ret(id, { as: 'dev', claimToken: c.token, summary: 'late' })).body.error.code).toBe('claim_lost');
    expect(await lanes('dev2')).not.toContain(id);
    expect((await baton.get('/v1/agents/dev2/inbox')).body.handoffs.map((x: any) => x.id)).not.toContain(id);
  });

  it('removing a manual agent makes its open handoffs UNAVAILABLE and settles their work, in the event log', async () => {
    await agents('leaver');
    const waiting = await work('lead', 'leaver');
    const claimed = await work('lead', 'leaver');
    expect((await accept(claimed, 'leaver')).status).toBe(200);
    const message = (await baton.post('/v1/handoffs', { from: 'lead', to: 'leaver', message: 'fyi' })).body.id as string;
    expect((await baton.del('/v1/agents/leaver')).status).toBeLessThan(300);
    for (const [id, workFrom, workTo] of [
      [waiting, 'open', 'expired'],
      [claimed, 'claimed', 'expired'],
      [message, null, null],
    ] as const) {
      const h = await get(id);
      expect(h, id).toMatchObject({ state: 'UNAVAILABLE', workState: workTo });
      const ev = h.events.filter((e: any) => e.to === 'UNAVAILABLE');
      expect(ev.map((e: any) => [e.event, e.workFrom, e.workTo])).toEqual(
        workTo === null
          ? [['recipient_gone', null, null]]
          : [
              ['recipient_gone', null, null],
              ['expired', workFrom, workTo],
            ],
      );
    }
    const board = (Object.values((await baton.get('/v1/board')).body).flat() as any[]).map((c) => c.handoff.id);
    expect(board).not.toContain(waiting);
    expect(board).not.toContain(claimed);
  });

  it('removing a pushed agent settles its held handoffs at once, not when their turn comes', async () => {
    expect((await baton.post('/v1/agents', { id: 'pushed', provider: 'demo' })).status).toBe(201);
    expect((await baton.put('/v1/connections', { from: 'lead', to: 'pushed', rule: 'block' })).status).toBe(200);
    const id = await work('lead', 'pushed');
    await waitForState(baton, id, 'HELD');
    expect((await baton.del('/v1/agents/pushed')).status).toBeLessThan(300);
    expect(await get(id)).toMatchObject({ state: 'UNAVAILABLE', workState: 'expired' });
  });
});

describe('inbox and outbox', () => {
  it('show what needs the agent and what it sent', async () => {
    const mine = await work('lead', 'dev3');
    const open = await work('lead', '@project');
    const inbox = (await baton.get('/v1/agents/dev3/inbox')).body;
    const ids = inbox.handoffs.map((h: any) => h.id);
    expect(ids).toContain(mine);
    expect(ids).toContain(open);
    const outbox = (await baton.get('/v1/agents/lead/outbox')).body;
    expect(outbox.handoffs.map((h: any) => h.id).slice(0, 2)).toEqual([open, mine]);
    expect((await baton.get('/v1/agents/dev2/inbox')).body.handoffs.map((h: any) => h.id)).not.toContain(mine);
  });
});
