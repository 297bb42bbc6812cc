import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../libs/domain/clock.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

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
  await baton.db.pool.query(`INSERT INTO projects (id, workspace_id, slug, name) SELECT gen_random_uuid(), id, 'other', 'Other' FROM workspaces WHERE slug = 'default'`);
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
    expect((await close(id, { as: 'lead', resolution: 'blocked', note: 'waiting on infra' })).body.work).toMatchObject({ resolution: 'blocked' });
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
