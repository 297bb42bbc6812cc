import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../libs/domain/clock.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';
import { captureCli } from '../support/capture-cli.ts';
import { scratchDir } from '../support/scratch-dir.ts';

/**
 * Budgets (issue 34): a project's or an agent's spending per UTC day, counted from the usage the
 * runtimes reported on each attempt. Here a turn's report is written onto its attempt row as an
 * adapter's turn end would store it (the adapters' own reports are tested in
 * turn-usage*.test.ts); the budget then holds the next handoff HELD, no attempt spent, until a
 * higher budget, its removal, or the next day.
 */

let baton: TestBaton;
// Noon UTC: the day's window has twelve hours left.
const clock = new ManualClock(Date.UTC(2026, 11, 8, 12, 0, 0));
let n = 0;

async function agent(): Promise<string> {
  const id = `b${++n}`;
  expect((await baton.post('/v1/agents', { id, provider: 'demo' })).status).toBe(201);
  return id;
}

async function send(from: string, to: string): Promise<string> {
  const res = await baton.post('/v1/handoffs', { from, to, message: `work ${++n}`, title: `work ${n}` });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** What the runtime reported the handoff's last turn used, stored on its attempt. */
async function reportUsage(handoffId: string, usage: { input: number; output: number; usd: number }): Promise<void> {
  const { rowCount } = await baton.db.pool.query(
    `UPDATE delivery_attempts SET input_tokens = $2, output_tokens = $3, cost_usd = $4
     WHERE handoff_id = $1 AND number = (SELECT max(number) FROM delivery_attempts WHERE handoff_id = $1)`,
    [handoffId, usage.input, usage.output, usage.usd],
  );
  expect(rowCount).toBe(1);
}

const until = (id: string, state: string) => waitForState(baton, id, state);
const put = (body: unknown) => baton.put('/v1/budgets', body);

beforeAll(async () => {
  baton = await startTestBaton({ clock });
  baton.startWorker();
});

afterAll(async () => {
  await baton?.stop();
});

describe('budgets', () => {
  it('refuse what is not a budget with a stable code, and only an admin sets one', async () => {
    const a = await agent();
    for (const body of [{}, { tokensPerDay: 0 }, { tokensPerDay: 1.5 }, { usdPerDay: -1 }, { usdPerDay: 'five' }, { tokensPerDay: null }]) {
      const res = await put(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code, JSON.stringify(res.body)).toBe('invalid_budget');
    }
    expect((await put({ agent: 'nobody', tokensPerDay: 10 })).body.error.code).toBe('agent_not_found');
    expect((await baton.del('/v1/budgets?agent=' + a)).body.error.code).toBe('budget_not_found');
    const token = await baton.tokenFor(a);
    const asAgent = await baton.app.inject({
      method: 'PUT',
      url: '/v1/budgets',
      headers: { authorization: `Bearer ${token}` },
      payload: { tokensPerDay: 10 },
    });
    expect(asAgent.statusCode).toBe(403);
    expect((await baton.get('/v1/budgets')).body.items).toEqual([]);
  });

  it("an agent's token budget, once spent, holds its next handoff HELD with the reason and no attempt; a higher budget lifts it at once", async () => {
    const [lead, dev, other] = [await agent(), await agent(), await agent()];
    expect((await put({ agent: dev, tokensPerDay: 100 })).status).toBe(200);
    const first = await send(lead, dev);
    await until(first, 'RETURNED');
    await reportUsage(first, { input: 120, output: 30, usd: 0.01 });

    const second = await send(lead, dev);
    const held = await until(second, 'HELD');
    expect(held.attemptCount).toBe(0);
    expect(held.detail).toBe(
      `budget: agent ${dev} spent 150 of 100 tokens today (UTC); held until 2026-12-09T00:00:00.000Z or a higher budget`,
    );
    // The sender sees why, in the handoff and in its timeline.
    expect(held.events.find((e: any) => e.event === 'held')).toMatchObject({ reason: held.detail });
    // Another agent is not held by dev's budget.
    await until(await send(lead, other), 'RETURNED');

    const shown = (await baton.get(`/v1/budgets?agent=${dev}`)).body.items;
    expect(shown).toEqual([
      expect.objectContaining({
        agent: dev,
        tokensPerDay: 100,
        usdPerDay: null,
        spentToday: { tokens: 150, usd: 0.01 },
        holding: held.detail,
      }),
    ]);
    // The agent reads the budget that covers it with its own token.
    const mine = await baton.get('/v1/budgets', { authorization: `Bearer ${await baton.tokenFor(dev)}` });
    expect(mine.body.items.map((b: any) => b.agent)).toEqual([dev]);

    expect((await put({ agent: dev, tokensPerDay: 1_000 })).body.items[0].holding).toBeNull();
    const done = await until(second, 'RETURNED');
    expect(done.events.filter((e: any) => e.workTo === null).map((e: any) => e.event)).toEqual([
      'enrolled',
      'held',
      'hold_lifted',
      'attempt_reserved',
      'turn_accepted',
      'turn_started',
      'turn_returned',
    ]);
  });

  it("a project's dollar budget holds every agent of it until the next UTC day, and the reconciler lifts it then; clearing a budget lifts its holds", async () => {
    const [lead, x, y] = [await agent(), await agent(), await agent()];
    expect((await put({ usdPerDay: 0.5 })).status).toBe(200);
    const first = await send(lead, x);
    await until(first, 'RETURNED');
    await reportUsage(first, { input: 10, output: 10, usd: 0.75 });

    // The project's budget counts every agent's turns: dev's $0.01 of the test before, and x's $0.75.
    const toY = await send(lead, y);
    expect((await until(toY, 'HELD')).detail).toMatch(/^budget: project default spent \$0\.76 of \$0\.50 today/);
    await baton.reconcile();
    expect((await baton.get(`/v1/handoffs/${toY}`)).body.state).toBe('HELD');

    clock.advance(12 * 60 * 60_000);
    await baton.reconcile();
    await until(toY, 'RETURNED');

    // The new day's spending: one turn over the budget again, then the budget removed.
    await reportUsage(toY, { input: 1, output: 1, usd: 0.6 });
    const toX = await send(lead, x);
    expect((await until(toX, 'HELD')).detail).toMatch(/^budget: project default spent \$0\.60 of/);
    expect((await baton.del('/v1/budgets')).status).toBe(200);
    await until(toX, 'RETURNED');
  });

  it('baton budget set|show|clear over the API, with what was spent and a clear refusal', async () => {
    const env = { BATON_URL: await baton.listen(), BATON_TOKEN: baton.adminToken, BATON_HOME: scratchDir('baton-budget-') };
    const cli = (...argv: string[]) => captureCli(env, argv);
    const a = await agent();
    const set = await cli('budget', 'set', '--agent', a, '--tokens', '5000', '--usd', '2.5');
    expect(set.code, set.err).toBe(0);
    expect(set.out).toMatch(new RegExp(`${a}\\s+5000\\s+\\$2\\.50\\s+0\\s+\\$0\\.00\\s+open`));
    const json = JSON.parse((await cli('budget', 'show', '--agent', a, '--json')).out);
    expect(json).toContainEqual(expect.objectContaining({ agent: a, tokensPerDay: 5000, usdPerDay: 2.5, holding: null }));
    expect((await cli('budget', 'set', '--agent', a)).code).toBe(2);
    const bad = await cli('budget', 'set', '--tokens', 'many');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--tokens must be a whole number');
    expect((await cli('budget', 'clear', '--agent', a)).out).toContain(`cleared the budget of agent ${a}`);
    const again = await cli('budget', 'clear', '--agent', a);
    expect(again.code).toBe(1);
    expect(again.err).toContain('budget_not_found');
  });
});
