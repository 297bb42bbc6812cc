import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HELD_PAGE_SQL } from '../../libs/db/held-handoffs.ts';
import { settingsFrom } from '../../libs/domain/runtime-settings.ts';
import { liftHolds } from '../../libs/handoffs/lift-holds.ts';
import { countStatements } from '../support/count-statements.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * Issue item 10: holds past the first page were never lifted. `held(500)` read the oldest 500
 * HELD handoffs and skipped those still blocked, so behind 500 holds on a blocked pair every
 * later hold stayed HELD for ever, also right after a setting changed.
 */
let baton: TestBaton;
let n = 0;

async function agent(): Promise<string> {
  const id = `p${++n}`;
  expect((await baton.post('/v1/agents', { id, provider: 'demo' })).status).toBe(201);
  return id;
}

async function block(from: string, to: string) {
  expect((await baton.put('/v1/connections', { from, to, rule: 'block' })).status).toBe(200);
}

/** `count` handoffs from -> to, sent a few at a time (in send order per batch). */
async function sendMany(from: string, to: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 20) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(20, count - i) }, async () => {
        const res = await baton.post('/v1/handoffs', { from, to, message: `held ${++n}` });
        expect(res.status).toBe(201);
        return res.body.id as string;
      }),
    );
    ids.push(...batch);
  }
  return ids;
}

async function statesOf(ids: readonly string[]): Promise<Map<string, number>> {
  const { rows } = await baton.db.pool.query<{ state: string; n: number }>(
    `SELECT delivery_state::text AS state, count(*)::int AS n FROM handoffs WHERE id = ANY($1::uuid[]) GROUP BY 1`,
    [ids],
  );
  return new Map(rows.map((r) => [r.state, r.n]));
}

let blockedFrom: string;
let blockedTo: string;
let olderHeld: string[];

beforeAll(async () => {
  baton = await startTestBaton();
  [blockedFrom, blockedTo] = [await agent(), await agent()];
  await block(blockedFrom, blockedTo);
  // 520 holds on a pair that stays blocked, all older (lower seq) than the holds the tests lift.
  olderHeld = await sendMany(blockedFrom, blockedTo, 520);
  expect(await statesOf(olderHeld)).toEqual(new Map([['HELD', 520]]));
}, 120_000);

afterAll(async () => {
  await baton?.stop();
});

describe('lifting holds pages through every HELD handoff (keyset on seq, bounded per statement)', () => {
  it('unblocking a pair lifts its 5 holds at once, though 520 older holds on another pair stay blocked', async () => {
    const [from, to] = [await agent(), await agent()];
    await block(from, to);
    const five = await sendMany(from, to, 5);
    expect(await statesOf(five)).toEqual(new Map([['HELD', 5]]));
    // The API lifts what no longer applies right after the change (no worker runs: lifted is WAITING).
    expect((await baton.put('/v1/connections', { from, to, rule: 'allow' })).status).toBe(200);
    expect(await statesOf(five), 'the 5 holds of the unblocked pair are lifted').toEqual(new Map([['WAITING', 5]]));
    expect(await statesOf(olderHeld), 'the blocked pair keeps its holds').toEqual(new Map([['HELD', 520]]));
  });

  it('a reconciler pass lifts them too when the block ended without the API lifting (e.g. changed by another process)', async () => {
    const [from, to] = [await agent(), await agent()];
    await block(from, to);
    const five = await sendMany(from, to, 5);
    // The rule changes under the API (as a change made elsewhere, or one whose own lift failed).
    await baton.db.pool.query(
      `UPDATE connections SET rule = 'allow' WHERE from_id = (SELECT id FROM agents WHERE handle = $1) AND to_id = (SELECT id FROM agents WHERE handle = $2)`,
      [from, to],
    );
    const worker = baton.startWorker();
    try {
      const report = await baton.reconcile();
      expect(report.liftedHolds, 'one pass lifts the 5 behind the 520 still blocked').toBe(5);
      const states = await statesOf(five);
      expect(states.get('HELD') ?? 0).toBe(0);
      expect(await statesOf(olderHeld)).toEqual(new Map([['HELD', 520]]));
    } finally {
      await worker.stop();
    }
  });

  it('many liftable holds take several bounded statements, each page after the last one read', async () => {
    const [from, to] = [await agent(), await agent()];
    await block(from, to);
    const seven = await sendMany(from, to, 7);
    await baton.db.pool.query(
      `UPDATE connections SET rule = 'allow' WHERE from_id = (SELECT id FROM agents WHERE handle = $1) AND to_id = (SELECT id FROM agents WHERE handle = $2)`,
      [from, to],
    );
    const pages = countStatements(baton.db.pool, HELD_PAGE_SQL);
    try {
      const lifted = await liftHolds(
        { ...baton.core, settingsReader: { get: async () => settingsFrom(await baton.repos.settings.all()) } },
        { pageSize: 3 },
      );
      expect(lifted).toBe(7);
      // 3 + 3 + 1 liftable rows: the short third page says it was the last.
      expect(pages.count()).toBe(3);
    } finally {
      pages.stop();
    }
    expect(await statesOf(seven)).toEqual(new Map([['WAITING', 7]]));
    expect(await statesOf(olderHeld)).toEqual(new Map([['HELD', 520]]));
  });
});
