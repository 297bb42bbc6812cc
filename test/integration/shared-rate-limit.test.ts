import type { FastifyInstance } from 'fastify';
import type { RedisClient } from '../../libs/queue/open-redis.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRedis } from '../../libs/queue/open-redis.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { buildApp } from '../../services/api/app.ts';
import { TEST_REDIS_URL } from '../support/env.ts';
import { silentLogger, startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * The rate limit (@fastify/rate-limit on its Redis store) is one budget per token for the whole
 * deployment: two API processes sharing a Redis prefix spend the same counter, so a client
 * cannot double its rate by spreading calls over them. Calls with no valid token are counted
 * per client address, so guessing tokens is limited too.
 */

const LIMIT = { perSecond: 1, burst: 4 };
let baton: TestBaton;
/** A second API "process": its own app and its own Redis connection, the same database and prefix. */
let other: FastifyInstance;
let otherRedis: RedisClient;

beforeAll(async () => {
  baton = await startTestBaton({ rateLimit: LIMIT });
  otherRedis = openRedis(TEST_REDIS_URL, 'producer', baton.logger);
  other = await buildApp({
    core: baton.core,
    turnReports: baton.repos.turnReports,
    defaultProject: 'default',
    logger: silentLogger(),
    rateLimit: { limit: LIMIT, redis: otherRedis, names: new RedisNames(baton.prefix) },
    checks: {},
  });
  await other.ready();
});

afterAll(async () => {
  await other?.close();
  await otherRedis?.quit();
  await baton?.stop();
});

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

describe('a rate limit shared by every API process', () => {
  it('one token calling two API processes alternately gets the burst once, not once per process; another token is unaffected', async () => {
    expect((await baton.post('/v1/agents', { id: 'spread', provider: 'manual' })).status).toBe(201);
    expect((await baton.post('/v1/agents', { id: 'quiet', provider: 'manual' })).status).toBe(201);
    const spread = await baton.tokenFor('spread');
    const quiet = await baton.tokenFor('quiet');
    const statuses: number[] = [];
    const refused = [];
    for (let i = 0; i < 10; i++) {
      const app = i % 2 === 0 ? baton.app : other;
      const res = await app.inject({ method: 'GET', url: '/v1/whoami', headers: auth(spread) });
      statuses.push(res.statusCode);
      if (res.statusCode === 429) refused.push(res);
    }
    // Per-process buckets would have let 2 × 4 through.
    expect(statuses.filter((s) => s === 200)).toHaveLength(LIMIT.burst);
    expect(statuses.filter((s) => s === 429)).toHaveLength(10 - LIMIT.burst);
    for (const res of refused) {
      expect(res.json()).toEqual({
        error: { code: 'rate_limited', message: expect.any(String), details: { retryAfterSeconds: expect.any(Number) } },
      });
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(Math.ceil(LIMIT.burst / LIMIT.perSecond));
      expect(res.headers['cache-control']).toBe('private, no-store');
    }
    // Both processes count under the deployment's prefix, per token id.
    const tokenId = (await other.inject({ method: 'GET', url: '/v1/whoami', headers: auth(quiet) })).json().tokenId as string;
    const names = new RedisNames(baton.prefix);
    expect(await baton.redis.exists(names.rateLimitNamespace + names.rateLimitSubject('token', tokenId))).toBe(1);
    expect((await baton.app.inject({ method: 'GET', url: '/v1/whoami', headers: auth(quiet) })).statusCode).toBe(200);
  });

  it('calls whose token is refused are counted per client address: guessing tokens meets 429 too', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const app = i % 2 === 0 ? baton.app : other;
      const res = await app.inject({
        method: 'GET',
        url: '/v1/status',
        headers: auth(`baton_${String(i).repeat(43).slice(0, 43)}`),
        remoteAddress: '192.0.2.7',
      });
      statuses.push(res.statusCode);
    }
    expect(statuses.filter((s) => s === 401)).toHaveLength(LIMIT.burst);
    expect(statuses.filter((s) => s === 429)).toHaveLength(8 - LIMIT.burst);
    // Another address is not held back by them.
    expect(
      (await baton.app.inject({ method: 'GET', url: '/v1/status', headers: auth(`baton_${'Z'.repeat(43)}`), remoteAddress: '192.0.2.8' }))
        .statusCode,
    ).toBe(401);
  });

  it.each([
    ['POST /mcp', { method: 'POST' as const, url: '/mcp', payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } }],
    ['GET /admin/queues', { method: 'GET' as const, url: '/admin/queues' }],
    ['GET /admin/queues/api/queues', { method: 'GET' as const, url: '/admin/queues/api/queues' }],
  ])('refused tokens on %s are counted per client address like every other route', async (_what, request) => {
    const address = `192.0.2.${10 + Math.floor(Math.random() * 200)}`;
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await baton.app.inject({
        ...request,
        headers: auth(`baton_${String(i).repeat(43).slice(0, 43)}`),
        remoteAddress: address,
      });
      statuses.push(res.statusCode);
    }
    expect(statuses.filter((s) => s === 401)).toHaveLength(LIMIT.burst);
    expect(statuses.filter((s) => s === 429)).toHaveLength(8 - LIMIT.burst);
  });
});
