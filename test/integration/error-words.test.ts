import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * Refusals say what happened and what to do, in the user's words, with their stable codes
 * unchanged: a duplicate names its original, a token that is no Baton token is "unknown or
 * revoked", returned work is closed rather than cancelled, an admin names who it acts as.
 */
let baton: TestBaton;
const tokens: Record<string, string> = {};
const auth = (who: string) => ({ authorization: `Bearer ${tokens[who]}` });

beforeAll(async () => {
  baton = await startTestBaton();
  for (const id of ['sender', 'taker']) {
    expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
    tokens[id] = await baton.tokenFor(id);
  }
});

afterAll(async () => {
  await baton?.stop();
});

describe("refusals in the user's words", () => {
  it('accepting a DUPLICATE names the original to accept instead (code invalid_transition)', async () => {
    const work = { to: 'taker', title: 'the same work', message: 'do this once' };
    const first = await baton.post('/v1/handoffs', work, auth('sender'));
    const again = await baton.post('/v1/handoffs', work, auth('sender'));
    expect(again.status).toBe(201);
    expect(again.body.state).toBe('DUPLICATE');
    const refused = await baton.post(`/v1/handoffs/${again.body.id}/accept`, {}, auth('taker'));
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('invalid_transition');
    expect(refused.body.error.message).toBe(
      `handoff ${again.body.id} is a duplicate of ${first.body.id} (the same work sent again while that one was open): accept ${first.body.id} instead`,
    );
  });

  it('a well-formed bearer header with a string that is no Baton token is "unknown or revoked token"', async () => {
    const res = await baton.get('/v1/whoami', { authorization: 'Bearer not-a-baton-token' });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('unauthenticated');
    expect(res.body.error.message).toMatch(/^unknown or revoked token/);
    const revoked = await baton.get('/v1/whoami', { authorization: `Bearer baton_${'Q'.repeat(43)}` });
    expect(revoked.body.error.code).toBe('invalid_token');
    expect(revoked.body.error.message).toMatch(/^unknown or revoked token/);
    // A header that is not a bearer at all still says what shape it wants.
    expect((await baton.get('/v1/whoami', { authorization: 'Basic dXNlcjpwYXNz' })).body.error.message).toContain('Bearer');
  });

  it('cancelling work that was returned says to close it instead (code invalid_transition)', async () => {
    const sent = await baton.post('/v1/handoffs', { to: 'taker', title: 'done soon', message: 'do it' }, auth('sender'));
    const claim = await baton.post(`/v1/handoffs/${sent.body.id}/accept`, {}, auth('taker'));
    expect(
      (await baton.post(`/v1/handoffs/${sent.body.id}/return`, { claimToken: claim.body.claim.token, summary: 'done' }, auth('taker')))
        .status,
    ).toBe(200);
    const refused = await baton.post(`/v1/handoffs/${sent.body.id}/cancel`, {}, auth('sender'));
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('invalid_transition');
    expect(refused.body.error.message).toMatch(/already returned: close it instead/);
  });

  it('an admin that sends without naming its agent is told to use --as (code validation_failed)', async () => {
    const res = await baton.post('/v1/handoffs', { to: 'taker', message: 'from whom?' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.message).toContain('--as <agent>');
  });
});
