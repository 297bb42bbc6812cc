import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxiedApi, type ProxiedApi } from '../support/proxied-api.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

// A pull receiver's replayable calls (accept, return) whose answer never reached it: through an
// API whose Postgres replies can be lost after the commit (a proxy swallows the statement's
// reply and breaks its connection), and as two identical calls racing. The retry with the same
// claim token must get what the first call did, never claim_lost or stale_revision.
let baton: TestBaton;
let api: ProxiedApi;
let n = 0;

beforeAll(async () => {
  baton = await startTestBaton();
  // Timeouts do not matter here: a lost reply breaks the connection at once.
  api = await startProxiedApi(baton, { poolSize: 4, timeouts: { queryMs: 2_000, connectMs: 2_000 } });
  for (const id of ['lead', 'puller']) expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
}, 60_000);

afterAll(async () => {
  await api?.stop();
  await baton?.stop();
});

async function work(): Promise<string> {
  const res = await baton.post('/v1/handoffs', { from: 'lead', to: 'puller', title: `lost reply ${++n}`, message: `task ${n}` });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** The work moves named `event` in the handoff's log (a pull claim's delivery move has its own row). */
async function events(id: string, event: string): Promise<number> {
  const { rows } = await baton.db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM handoff_events WHERE handoff_id = $1 AND event = $2 AND work_to_state IS NOT NULL',
    [id, event],
  );
  return rows[0]!.n;
}

describe.each(['succeeded', 'failed'] as const)('a return (outcome %s) whose reply was lost after its commit', (outcome) => {
  it('answers 503 (it may have happened); the retry with the same claim token gets the return it made (recovered: true), recorded once', async () => {
    const id = await work();
    const claim = await baton.post(`/v1/handoffs/${id}/accept`, { as: 'puller' });
    expect(claim.status).toBe(200);
    const summary = `result ${id} ${outcome}`;
    const body = { as: 'puller', claimToken: claim.body.claim.token, summary, outcome };
    // The summary is in the return's own statement only (the reason, the result, the event detail).
    const cut = api.proxy.cutAfterReply(summary);
    const first = await api.post(`/v1/handoffs/${id}/return`, body);
    await cut;
    expect(first.status, JSON.stringify(first.body)).toBe(503);
    expect(first.body.error.code).toBe('database_unavailable');

    const retry = await api.post(`/v1/handoffs/${id}/return`, body);
    expect(retry.status, JSON.stringify(retry.body)).toBe(200);
    expect(retry.body.recovered).toBe(true);
    expect(retry.body.handoff.work.state).toBe(outcome === 'succeeded' ? 'returned' : 'open');
    expect(await events(id, outcome === 'succeeded' ? 'returned' : 'return_failed')).toBe(1);
    // A different body with the same claim is still a conflict, not a second return.
    const other = await api.post(`/v1/handoffs/${id}/return`, { ...body, summary: 'something else' });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('replay_conflict');
  });
});

describe('an accept whose reply was lost after its commit', () => {
  it('answers 503; the retry gets the claim that was made (same token, recovered: true), one claim recorded', async () => {
    const id = await work();
    const cut = api.proxy.cutAfterReply('claimed by puller');
    const first = await api.post(`/v1/handoffs/${id}/accept`, { as: 'puller' });
    await cut;
    expect(first.status, JSON.stringify(first.body)).toBe(503);
    const retry = await api.post(`/v1/handoffs/${id}/accept`, { as: 'puller' });
    expect(retry.status, JSON.stringify(retry.body)).toBe(200);
    expect(retry.body.recovered).toBe(true);
    const { rows } = await baton.db.pool.query<{ token: string }>('SELECT claim_token AS token FROM handoffs WHERE id = $1', [id]);
    expect(retry.body.claim.token).toBe(rows[0]!.token);
    expect(await events(id, 'claimed')).toBe(1);
  });
});

describe('a retry racing the call whose answer it has not seen', () => {
  const PAIRS = 20;

  it(`${PAIRS} pairs of identical returns fired at once: every call answers 200, exactly one of each pair made the return`, async () => {
    const claims = await Promise.all(
      Array.from({ length: PAIRS }, async () => {
        const id = await work();
        const c = await baton.post(`/v1/handoffs/${id}/accept`, { as: 'puller' });
        expect(c.status).toBe(200);
        return { id, token: c.body.claim.token as string };
      }),
    );
    const answers = await Promise.all(
      claims.flatMap(({ id, token }) => {
        const body = { as: 'puller', claimToken: token, summary: `raced ${id}` };
        return [baton.post(`/v1/handoffs/${id}/return`, body), baton.post(`/v1/handoffs/${id}/return`, body)];
      }),
    );
    const refused = answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.body?.error?.code}`);
    expect(refused, 'a retry of a return that happened is answered, never refused').toEqual([]);
    for (let i = 0; i < PAIRS; i++) {
      expect([answers[2 * i]!.body.recovered, answers[2 * i + 1]!.body.recovered].sort()).toEqual([false, true]);
      expect(await events(claims[i]!.id, 'returned')).toBe(1);
    }
  });

  it(`${PAIRS} pairs of accepts by the same agent fired at once: every call answers 200 with the one claim, exactly one made it`, async () => {
    const ids = await Promise.all(Array.from({ length: PAIRS }, () => work()));
    const answers = await Promise.all(
      ids.flatMap((id) => [
        baton.post(`/v1/handoffs/${id}/accept`, { as: 'puller' }),
        baton.post(`/v1/handoffs/${id}/accept`, { as: 'puller' }),
      ]),
    );
    const refused = answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.body?.error?.code}`);
    expect(refused, "an accept racing the same agent's accept is answered with its claim").toEqual([]);
    for (let i = 0; i < PAIRS; i++) {
      const [a, b] = [answers[2 * i]!.body, answers[2 * i + 1]!.body];
      expect(a.claim.token).toBe(b.claim.token);
      expect([a.recovered, b.recovered].sort()).toEqual([false, true]);
      expect(await events(ids[i]!, 'claimed')).toBe(1);
    }
  });
});
