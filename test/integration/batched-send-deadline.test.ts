import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxiedApi, type ProxiedApi } from '../support/proxied-api.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { watchLoopLag } from '../support/loop-lag.ts';

// Many sends at once against a Postgres that stopped answering. Sends share batched statements
// (GroupCommit: here one batch of up to 64 in flight, the API's pool having 2 connections), so
// most of them wait for a batch; each must still be answered 503 within the documented bound,
// connect + query timeout, not one timeout per round of batches ahead of it.
const timeouts = { queryMs: 1_000, connectMs: 1_000 };
const BOUND_MS = timeouts.connectMs + timeouts.queryMs;
/**
 * What a call may take beyond the bound here: app.inject parsing and routing 384 calls started
 * together. Timers firing late on a busy machine come on top: the test adds the event-loop lag
 * it observed. Without a deadline on waiting calls the last ones answer after six rounds of a
 * timeout each (about 6 s).
 */
const MARGIN_MS = 1_500;
/** Six batches' worth: 5 rounds wait behind the first. */
const SENDS = 6 * 64;

let baton: TestBaton;
let api: ProxiedApi;

beforeAll(async () => {
  baton = await startTestBaton();
  api = await startProxiedApi(baton, { poolSize: 2, timeouts });
  for (const id of ['burst-from', 'burst-to']) expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
  // Warms the proxied API: its token is cached and a connection is open before Postgres stalls.
  expect((await api.post('/v1/handoffs', { from: 'burst-from', to: 'burst-to', message: 'warm-up' })).status).toBe(201);
}, 60_000);

afterAll(async () => {
  await api?.stop();
  await baton?.stop();
});

/** Ways Postgres stops answering: the network holds every byte, or the rows sends write are locked. */
const stalls = {
  'a frozen connection (nothing forwarded either way)': async () => {
    api.proxy.freeze();
    return async () => api.proxy.thaw();
  },
  'a lock on the handoffs table held by another transaction': async () => {
    const holder: pg.PoolClient = await baton.db.pool.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE handoffs IN EXCLUSIVE MODE');
    return async () => {
      await holder.query('ROLLBACK');
      holder.release();
    };
  },
};

describe.each(Object.keys(stalls) as Array<keyof typeof stalls>)('%s', (stall) => {
  it(`${SENDS} concurrent sends each answer 503 database_unavailable within connect + query timeout (+${MARGIN_MS} ms); retried with their keys once Postgres answers, each is recorded exactly once`, async () => {
    const tag = stall.split(' ')[1]!;
    const body = (i: number) => ({ from: 'burst-from', to: 'burst-to', message: `burst ${tag} ${i}`, idempotencyKey: `burst-${tag}-${i}` });
    const resume = await stalls[stall]();
    const lag = watchLoopLag();
    let answers: Array<{ status: number; code: string | undefined; ms: number }>;
    try {
      answers = await Promise.all(
        Array.from({ length: SENDS }, async (_, i) => {
          const started = Date.now();
          const res = await api.post('/v1/handoffs', body(i));
          return { status: res.status, code: res.body?.error?.code as string | undefined, ms: Date.now() - started };
        }),
      );
    } finally {
      lag.stop();
      await resume();
    }
    expect(answers.filter((a) => a.status !== 503 || a.code !== 'database_unavailable').map((a) => `${a.status} ${a.code}`)).toEqual([]);
    const slowest = Math.max(...answers.map((a) => a.ms));
    expect(slowest, `the slowest of ${SENDS} sends took ${slowest} ms (timers ran up to ${Math.round(lag.maxMs())} ms late)`).toBeLessThan(
      BOUND_MS + MARGIN_MS + lag.maxMs(),
    );

    // A 503 may or may not have been recorded; the same key again gives the one handoff either way.
    // (A batch at a time: this API's one batch in flight must not make a retry wait past its own deadline.)
    const retried: Array<{ status: number; body: any }> = [];
    for (let from = 0; from < SENDS; from += 64) {
      retried.push(...(await Promise.all(Array.from({ length: 64 }, (_, k) => api.post('/v1/handoffs', body(from + k))))));
    }
    expect(retried.filter((r) => r.status !== 200 && r.status !== 201).map((r) => `${r.status} ${r.body?.error?.code}`)).toEqual([]);
    const { rows } = await baton.db.pool.query<{ keys: number; rows: number }>(
      `SELECT count(DISTINCT idempotency_key)::int AS keys, count(*)::int AS rows FROM handoffs WHERE idempotency_key LIKE $1`,
      [`burst-${tag}-%`],
    );
    expect(rows[0]).toEqual({ keys: SENDS, rows: SENDS });
  }, 60_000);
});
