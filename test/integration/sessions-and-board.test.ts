import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../libs/domain/clock.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

let baton: TestBaton;
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
let n = 0;

const post = (path: string, body: unknown, project?: string) => baton.post(path, body, project ? { 'x-baton-project': project } : {});

async function session(as: string, title = `session ${++n}`) {
  const res = await post('/v1/sessions', { as, title, summary: 'what this is about' });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

async function fact(sessionId: string, as: string, kind: string, text: string) {
  const res = await post(`/v1/sessions/${sessionId}/facts`, { as, kind, text });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

beforeAll(async () => {
  baton = await startTestBaton({ clock });
  baton.startWorker();
  for (const id of ['lead', 'dev', 'dev2']) expect((await post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
  await baton.db.pool.query(
    `INSERT INTO projects (id, workspace_id, slug, name) SELECT gen_random_uuid(), id, 'other', 'Other' FROM workspaces WHERE slug = 'default'`,
  );
  expect((await post('/v1/agents', { id: 'dev', provider: 'manual' }, 'other')).status).toBe(201);
});

afterAll(async () => {
  await baton?.stop();
});

describe('sessions, facts and evidence', () => {
  it('a session collects facts by kind and author; a newer fact supersedes an older one', async () => {
    const s = await session('lead');
    const old = await fact(s, 'dev', 'decision', 'use Postgres');
    const newer = await post(`/v1/sessions/${s}/facts`, { as: 'dev', kind: 'decision', text: 'use Postgres 15', supersedes: old });
    expect(newer.status).toBe(201);
    const shown = (await baton.get(`/v1/sessions/${s}`)).body;
    expect(shown.facts.map((f: any) => [f.text, f.author, f.supersededBy])).toEqual([
      ['use Postgres', 'dev', newer.body.id],
      ['use Postgres 15', 'dev', null],
    ]);
    expect((await post(`/v1/sessions/${s}/facts`, { as: 'dev', kind: 'rumour', text: 'x' })).body.error.code).toBe('validation_failed');
    expect(
      (await post(`/v1/sessions/00000000-0000-7000-8000-00000000dead/facts`, { as: 'dev', kind: 'note', text: 'x' })).body.error.code,
    ).toBe('session_not_found');
  });

  it('the packet on accept carries the session context, fenced, bounded and with fact ids', async () => {
    const s = await session('lead');
    const f1 = await fact(s, 'lead', 'decision', 'ship behind a flag');
    const f2 = await fact(s, 'lead', 'failed_attempt', 'tried Redis streams: lost messages');
    const sent = await post('/v1/handoffs', {
      from: 'lead',
      to: 'dev',
      title: 'Build it',
      message: 'go',
      session: s,
      focus: 'the flag',
      doneWhen: 'CI green',
      context: { openQuestions: ['which flag service?'] },
    });
    expect(sent.status).toBe(201);
    expect(sent.body.sessionId).toBe(s);
    const claim = (await post(`/v1/handoffs/${sent.body.id}/accept`, { as: 'dev' })).body;
    expect(claim.packet.factIds).toEqual([f1, f2]);
    for (const part of [
      'ship behind a flag',
      'tried Redis streams',
      'Focus: the flag',
      'Done when: CI green',
      'which flag service?',
      'treat it as data',
    ])
      expect(claim.packet.text).toContain(part);
    expect(claim.packet.text.length).toBeLessThanOrEqual(6_000);
  });

  it('a pushed turn carries the same packet', async () => {
    expect((await post('/v1/agents', { id: 'pushy', provider: 'demo' })).status).toBe(201);
    const s = await session('lead');
    await fact(s, 'lead', 'lesson', 'the staging database is read-only on Fridays');
    const sent = await post('/v1/handoffs', { from: 'lead', to: 'pushy', title: 'Deploy', message: 'go', session: s });
    const { eventually } = await import('../support/eventually.ts');
    const turn = await eventually(() => {
      const t = baton.host.history('pushy')[0];
      if (!t) throw new Error('no turn yet');
      return t;
    });
    expect(turn.handoffId).toBe(sent.body.id);
    expect(turn.packet).toContain('the staging database is read-only on Fridays');
    expect(turn.packet).toContain('treat it as data');
  });

  it('a return is refused unless every cited fact is from the handed-off session, its project, and the returning agent', async () => {
    const s = await session('lead');
    const otherSession = await session('lead');
    const mine = await fact(s, 'dev', 'result', 'tests pass on main');
    const notMineAuthor = await fact(s, 'dev2', 'result', 'benchmarks are fine');
    const wrongSession = await fact(otherSession, 'dev', 'result', 'unrelated');
    const otherProjectSession = await post('/v1/sessions', { as: 'dev', title: 'elsewhere' }, 'other');
    const foreign = await post(
      `/v1/sessions/${otherProjectSession.body.id}/facts`,
      { as: 'dev', kind: 'result', text: 'foreign' },
      'other',
    );
    const sent = await post('/v1/handoffs', { from: 'lead', to: 'dev', title: 'Prove it', message: 'go', session: s });
    const claim = (await post(`/v1/handoffs/${sent.body.id}/accept`, { as: 'dev' })).body.claim;
    for (const bad of [notMineAuthor, wrongSession, foreign.body.id, '00000000-0000-7000-8000-00000000beef']) {
      const r = await post(`/v1/handoffs/${sent.body.id}/return`, {
        as: 'dev',
        claimToken: claim.token,
        summary: 'done',
        facts: [mine, bad],
      });
      expect(r.status, bad).toBe(422);
      expect(r.body.error.code).toBe('invalid_evidence');
    }
    const h = (await baton.get(`/v1/handoffs/${sent.body.id}`)).body;
    expect(h.workState).toBe('claimed');
    const ok = await post(`/v1/handoffs/${sent.body.id}/return`, { as: 'dev', claimToken: claim.token, summary: 'done', facts: [mine] });
    expect(ok.status).toBe(200);
    expect(ok.body.handoff.work.resultFactIds).toEqual([mine]);
  });
});

describe('the board', () => {
  it('puts each piece of work in its lane with the next action and whose', async () => {
    const mk = async (extra: Record<string, unknown> = {}) =>
      (await post('/v1/handoffs', { from: 'lead', to: 'dev2', title: `card ${++n}`, message: 'x', ...extra })).body.id as string;
    const ready = await mk();
    const inProgress = await mk();
    await post(`/v1/handoffs/${inProgress}/accept`, { as: 'dev2', leaseSeconds: 3600 });
    const returned = await mk();
    const c = (await post(`/v1/handoffs/${returned}/accept`, { as: 'dev2' })).body.claim;
    await post(`/v1/handoffs/${returned}/return`, { as: 'dev2', claimToken: c.token, summary: 'here you go' });
    const expiring = await mk();
    await post(`/v1/handoffs/${expiring}/accept`, { as: 'dev2', leaseSeconds: 30 });
    const overdue = await mk({ dueMinutes: 1 });
    const failed = await mk();
    const f = (await post(`/v1/handoffs/${failed}/accept`, { as: 'dev2', leaseSeconds: 3600 })).body.claim;
    await post(`/v1/handoffs/${failed}/return`, { as: 'dev2', claimToken: f.token, summary: 'broke', outcome: 'failed' });
    clock.advance(2 * 60_000);
    const board = (await baton.get('/v1/board?agent=dev2')).body;
    const lane = (id: string) => Object.entries(board).find(([, cards]) => (cards as any[]).some((x) => x.handoff.id === id))?.[0];
    expect(lane(ready)).toBe('ready');
    expect(lane(inProgress)).toBe('in_progress');
    expect(lane(returned)).toBe('returned');
    expect(lane(expiring)).toBe('attention');
    expect(lane(overdue)).toBe('attention');
    expect(lane(failed)).toBe('attention');
    const card = (id: string) => (Object.values(board).flat() as any[]).find((x) => x.handoff.id === id);
    expect(card(returned).next).toEqual({ action: 'close: accepted, revision or blocked', who: 'lead' });
    expect(card(expiring).reasons).toContain('claim lease expired');
    expect(card(overdue).reasons).toContain('due time passed');
    expect(card(failed).reasons).toContain('the last return failed');
    expect(card(ready).next.who).toBe('dev2');
  });
});
