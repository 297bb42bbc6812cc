import { LiveViewRepository } from '../../libs/db/live-view-repository.ts';
import { EVERYONE } from '../../libs/domain/visibility.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.ts';
import { openEvents } from '../support/sse-follower.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * What the browser pages stand on, over app.inject and a real socket (real Postgres and Redis):
 * the site's root, a handoff's own address, Bull Board with nothing from another origin and a
 * way back, the project an EventSource names in its query, the work state the event stream
 * carries, and the live view's per-minute chart data. The browser itself: test/e2e/live-page.test.ts.
 */
let baton: TestBaton;
let url: string;
const OTHER = { 'x-baton-project': 'charted' };

beforeAll(async () => {
  baton = await startTestBaton();
  expect((await baton.post('/v1/projects', { id: 'charted' })).status).toBe(201);
  for (const id of ['sender', 'doer'])
    expect((await baton.post('/v1/agents', { id, provider: 'demo', settings: { thinkMs: 50 } }, OTHER)).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'desk', provider: 'manual' }, OTHER)).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'here', provider: 'manual' })).status).toBe(201);
  baton.startWorker();
  url = await baton.listen();
});

afterAll(async () => {
  await baton?.stop();
});

describe('the pages around the API', () => {
  it('sends a browser at the site root to the live page', async () => {
    const res = await baton.app.inject({ method: 'GET', url: '/' });
    expect([res.statusCode, res.headers.location]).toEqual([302, '/ui/']);
  });

  it("serves the live page at a handoff's own address, under the pages' CSP", async () => {
    const page = await baton.app.inject({ method: 'GET', url: '/ui/' });
    const res = await baton.app.inject({ method: 'GET', url: '/ui/handoffs/01a23461-be98-709a-bfef-a0ff4e3ac9f5' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toBe(page.body);
    expect(res.headers['content-security-policy']).toBe(page.headers['content-security-policy']);
    // The chart's script is one of the page's own files.
    const chart = await baton.app.inject({ method: 'GET', url: '/ui/assets/live-chart.js' });
    expect([chart.statusCode, chart.headers['content-type']]).toEqual([200, 'text/javascript; charset=utf-8']);
  });

  it('serves Bull Board with no Google Fonts stylesheet and a link back to the live page', async () => {
    const res = await baton.app.inject({ method: 'GET', url: '/admin/queues', headers: { authorization: `Bearer ${baton.adminToken}` } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).toContain('<div id="root">');
    expect(res.body).not.toContain('fonts.googleapis.com');
    expect(res.body).not.toContain('fonts.gstatic.com');
    const config = JSON.parse(/<script id="__UI_CONFIG__" type="application\/json">([\s\S]*?)<\/script>/.exec(res.body)?.[1] ?? 'null') as {
      miscLinks: Array<{ text: string; url: string }>;
      boardTitle: string;
    };
    expect(config.boardTitle).toBe('Baton queues');
    expect(config.miscLinks).toContainEqual({ text: '← Baton live page', url: '/ui/' });
    // And one on the page itself, outside Bull Board's React root, that needs no menu.
    expect(res.body).toMatch(/<body[^>]*>\s*<a id="baton-live-link" href="\/ui\/"/);
    // Every stylesheet and script the page names is its own.
    for (const m of res.body.matchAll(/(?:src|href)="([^"]+)"/g)) expect(m[1], 'no external asset').not.toMatch(/^(https?:)?\/\//);
  });
});

describe('what the live page reads', () => {
  it("follows an admin's project named in the query of GET /v1/events (an EventSource sends no headers), and the two names must agree", async () => {
    const follower = await openEvents(url, baton.adminToken, { query: 'project=charted&all_owners=true' });
    expect(follower.status).toBe(200);
    const here = await baton.post('/v1/handoffs', { from: 'here', to: 'here', title: 'in default', message: 'x' });
    const there = await baton.post('/v1/handoffs', { from: 'sender', to: 'desk', title: 'in charted', message: 'x' }, OTHER);
    expect([here.status, there.status]).toEqual([201, 201]);
    await follower.until((es) => es.some((e) => e.handoffId === there.body.id), 'the handoff of project charted');
    await follower.close();
    expect(follower.events.map((e) => e.handoffId)).not.toContain(here.body.id);
    // A delivery move records no work state: the event says the handoff's, so a page that first
    // meets the handoff on the stream can fill its "work" cell.
    const enrolled = follower.events.find((e) => e.handoffId === there.body.id && e.event === 'enrolled') as unknown as {
      workTo: unknown;
      workState: unknown;
    };
    expect([enrolled.workTo, enrolled.workState]).toEqual([null, 'open']);

    const clash = await fetch(`${url}/v1/events?project=charted`, {
      headers: { authorization: `Bearer ${baton.adminToken}`, 'x-baton-project': 'default' },
    });
    expect([clash.status, ((await clash.json()) as { error: { code: string } }).error.code]).toEqual([400, 'validation_failed']);
    // An agent's token stays in its own project, whatever the query says.
    const agent = await fetch(`${url}/v1/events?project=charted`, { headers: { authorization: `Bearer ${await baton.tokenFor('here')}` } });
    expect([agent.status, ((await agent.json()) as { error: { code: string } }).error.code]).toEqual([403, 'forbidden']);
  });

  it('gives the last hour per minute: what settled, by outcome, and send → returned p50/p90, only in the project asked for', async () => {
    const before = await baton.get('/v1/live?all_owners=true', OTHER);
    const sum = (body: any, state: string) =>
      (body.perMinute as Array<{ settled: Record<string, number> }>).reduce((n, m) => n + (m.settled[state] ?? 0), 0);
    const returnedBefore = sum(before.body, 'RETURNED');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await baton.post('/v1/handoffs', { from: 'sender', to: 'doer', title: `chart ${i}`, message: 'x' }, OTHER)).body.id);
    for (const id of ids) {
      await eventually(async () => expect((await baton.get(`/v1/handoffs/${id}?all_owners=true`, OTHER)).body.state).toBe('RETURNED'), {
        what: `${id} RETURNED`,
        timeoutMs: 30_000,
      });
    }
    const parked = await baton.post('/v1/handoffs', { from: 'sender', to: 'desk', title: 'to cancel', message: 'x' }, OTHER);
    expect((await baton.post(`/v1/handoffs/${parked.body.id}/cancel`, { as: 'sender' }, OTHER)).status).toBe(200);

    const live = await eventually(
      async () => {
        const res = await baton.get('/v1/live?all_owners=true', OTHER);
        expect([sum(res.body, 'RETURNED'), sum(res.body, 'CANCELLED')]).toEqual([returnedBefore + 3, 1]);
        return res;
      },
      { what: 'three returns and a cancel in the chart', timeoutMs: 15_000 },
    );
    const minutes = live.body.perMinute as Array<{
      at: string;
      settled: Record<string, number>;
      returned: { count: number; p50Ms: number | null; p90Ms: number | null };
    }>;
    expect(minutes).toHaveLength(60);
    // Oldest first, a minute apart, the current minute last.
    expect(Date.parse(minutes[59]!.at)).toBe(Math.floor(Date.parse(live.body.at) / 60_000) * 60_000);
    expect(Date.parse(minutes[1]!.at) - Date.parse(minutes[0]!.at)).toBe(60_000);
    expect(minutes.reduce((n, m) => n + m.returned.count, 0)).toBe(returnedBefore + 3);
    for (const m of minutes.filter((x) => x.returned.count > 0)) {
      expect(m.returned.p50Ms).not.toBeNull();
      expect(m.returned.p90Ms as number).toBeGreaterThanOrEqual(m.returned.p50Ms as number);
    }
    // The default project's chart holds none of it.
    const elsewhere = await baton.get('/v1/live?all_owners=true');
    expect(sum(elsewhere.body, 'RETURNED')).toBe(0);
    // Fewer handoffs than the sample: the chart is complete, and says so.
    expect(live.body.perMinuteSampleFull).toBe(false);
    // With a sample no larger than the project's handoffs, it says the chart may leave some out.
    const { rows } = await baton.db.pool.query<{ id: string; n: number }>(
      `SELECT p.id, (SELECT count(*)::int FROM handoffs h WHERE h.project_id = p.id) AS n FROM projects p WHERE p.slug = 'charted'`,
    );
    const chart = (limit: number) =>
      new LiveViewRepository(baton.db.pool).perMinute(rows[0]!.id, new Date(Date.parse(live.body.at)), 60, limit, EVERYONE);
    expect((await chart(rows[0]!.n)).sampleFull).toBe(true);
    expect((await chart(rows[0]!.n + 1)).sampleFull).toBe(false);
  }, 90_000);
});
