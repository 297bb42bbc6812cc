import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

let baton: TestBaton;
let token: string;

beforeAll(async () => {
  // Three calls per 30 s window: the fourth is refused.
  baton = await startTestBaton({ rateLimit: { perSecond: 0.1, burst: 3 } });
  expect((await baton.post('/v1/agents', { id: 'engineer', provider: 'demo' })).status).toBe(201);
  token = await baton.tokenFor('engineer');
});

afterAll(async () => {
  await baton?.stop();
});

describe('the A2A endpoint and the rate limit', () => {
  it("spends the token's /v1 budget, and refuses past it with a JSON-RPC error carrying rate_limited and Retry-After", async () => {
    const call = () =>
      baton.app.inject({
        method: 'POST',
        url: '/a2a/agents/engineer',
        headers: { authorization: `Bearer ${token}`, 'a2a-version': '1.0', 'content-type': 'application/json' },
        payload: { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: '01a24da0-f7d8-787a-b39b-62823859a2af' } },
      });
    // The /v1 call spends from the same budget.
    expect((await baton.app.inject({ method: 'GET', url: '/v1/whoami', headers: { authorization: `Bearer ${token}` } })).statusCode).toBe(
      200,
    );
    for (let i = 0; i < 2; i++) expect((await call()).statusCode).toBe(200);
    const refused = await call();
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBeDefined();
    const body = refused.json<{ jsonrpc: string; error: { code: number; data: Array<{ metadata: { batonCode: string } }> } }>();
    expect(body.jsonrpc).toBe('2.0');
    expect(body.error.code).toBe(-32600);
    expect(body.error.data[0]?.metadata.batonCode).toBe('rate_limited');
  });
});
