import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxiedApi, type ProxiedApi } from '../support/proxied-api.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

// A send over a blocked connection records the handoff, then holds it. Meanwhile the worker
// delivers the recipients' other handoffs (each reservation moves what waits behind it to BUSY,
// and a worker that meets a blocked head holds it itself), and the block is lifted and applied
// again (each change lifts the holds that no longer apply at once, and reconciler passes run).
// Whatever moved the new handoff first, the send recorded it: 201, never a 4xx. The blocked
// sends go through an API whose Postgres is a few milliseconds away (a proxy adding latency),
// as in production, while the worker's is near: a send's statements leave the worker time to act.
let baton: TestBaton;
let api: ProxiedApi;
const RECIPIENTS = ['race-to-0', 'race-to-1', 'race-to-2', 'race-to-3'];
const BLOCKED_SENDS = 240;
/** Delivered sends to the same recipients, so turns start (and queue the rest BUSY) all along. */
const OPEN_SENDS = 120;

beforeAll(async () => {
  baton = await startTestBaton();
  baton.startWorker();
  api = await startProxiedApi(baton, { poolSize: 10, timeouts: { queryMs: 5_000, connectMs: 3_000 } });
  api.proxy.latency(5, 10);
  for (const id of RECIPIENTS) expect((await baton.post('/v1/agents', { id, provider: 'demo' })).status).toBe(201);
  for (const id of ['race-blocked', 'race-open']) expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
}, 60_000);

afterAll(async () => {
  await api?.stop();
  await baton?.stop();
});

const block = (to: string, rule: 'allow' | 'block') => baton.put('/v1/connections', { from: 'race-blocked', to, rule });

describe('sends over a blocked connection racing the worker and hold changes', () => {
  it(`${BLOCKED_SENDS} such sends beside ${OPEN_SENDS} delivered ones: no send whose handoff was recorded answers 4xx; each (or its retry after a 503) answers the handoff as recorded`, async () => {
    for (const to of RECIPIENTS) expect((await block(to, 'block')).status).toBe(200);
    let sending = true;
    let toggles = 0;
    // Holds lifted and applied while the sends run: allow, then block again, with reconciler passes.
    const churn = (async () => {
      while (sending) {
        const to = RECIPIENTS[toggles % RECIPIENTS.length]!;
        expect((await block(to, 'allow')).status).toBe(200);
        await baton.reconcile();
        expect((await block(to, 'block')).status).toBe(200);
        toggles++;
      }
    })();
    const blocked = Array.from({ length: BLOCKED_SENDS }, (_, i) => ({ key: `held-race-${i}`, to: RECIPIENTS[i % RECIPIENTS.length]! }));
    const [answers] = await Promise.all([
      Promise.all(
        blocked.map((s, i) => api.post('/v1/handoffs', { from: 'race-blocked', to: s.to, message: `blocked ${i}`, idempotencyKey: s.key })),
      ),
      Promise.all(
        Array.from({ length: OPEN_SENDS }, (_, i) =>
          baton.post('/v1/handoffs', { from: 'race-open', to: RECIPIENTS[i % RECIPIENTS.length]!, message: `open ${i}` }),
        ),
      ),
    ]).finally(() => {
      sending = false;
    });
    await churn;

    const { rows } = await baton.db.pool.query<{ key: string; id: string }>(
      `SELECT h.idempotency_key AS key, h.id FROM handoffs h JOIN agents a ON a.id = h.sender_id WHERE a.handle = 'race-blocked'`,
    );
    const recorded = new Map(rows.map((r) => [r.key, r.id]));
    const refusedButRecorded = answers.flatMap((a, i) =>
      a.status >= 400 && a.status < 500 && recorded.has(blocked[i]!.key) ? [`${a.status} ${a.body.error.code}`] : [],
    );
    expect(refusedButRecorded, 'a send that recorded its handoff answered 4xx').toEqual([]);
    // A send may answer 503 database_unavailable on a machine too busy for the API's database
    // bounds: that promises nothing, and its client retries with the same key, which must give
    // the one handoff the key recorded (201 or 200), never a 4xx.
    const settled = await Promise.all(
      answers.map(async (a, i) => {
        if (a.status !== 503 || a.body?.error?.code !== 'database_unavailable') return a;
        const s = blocked[i]!;
        return api.post('/v1/handoffs', { from: 'race-blocked', to: s.to, message: `blocked ${i}`, idempotencyKey: s.key });
      }),
    );
    const after = await baton.db.pool.query<{ key: string; id: string }>(
      `SELECT h.idempotency_key AS key, h.id FROM handoffs h JOIN agents a ON a.id = h.sender_id WHERE a.handle = 'race-blocked'`,
    );
    const recordedAfter = new Map(after.rows.map((r) => [r.key, r.id]));
    expect(settled.filter((a) => a.status !== 201 && a.status !== 200).map((a) => `${a.status} ${a.body?.error?.code}`)).toEqual([]);
    expect(
      settled.map((a, i) => a.body.id === recordedAfter.get(blocked[i]!.key)).every(Boolean),
      'each answer is the handoff its key recorded',
    ).toBe(true);
    expect(recordedAfter.size, 'each key recorded one handoff').toBe(BLOCKED_SENDS);
    expect(toggles, 'holds were lifted and applied during the sends').toBeGreaterThan(0);
  }, 120_000);
});
