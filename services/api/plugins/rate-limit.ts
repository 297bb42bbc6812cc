import rateLimitPlugin from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RedisClient } from '../../../libs/queue/open-redis.ts';
import { BatonError } from '../../../libs/domain/errors.ts';
import type { RedisNames } from '../../../libs/queue/redis-names.ts';

/** `BATON_RATE_LIMIT_PER_SEC` / `BATON_RATE_LIMIT_BURST`; perSecond 0 turns the limit off. */
export interface RateLimit {
  readonly perSecond: number;
  readonly burst: number;
}

/** Checks one request against its caller's budget; throws 429 `rate_limited` when it is spent. */
export type RequestLimiter = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/**
 * How the two variables map onto @fastify/rate-limit's fixed window: `burst` calls per window
 * of `burst / perSecond` seconds, so the long-run average is `perSecond` and a caller may spend
 * the whole burst at once. A fixed window lets up to twice the burst through around a window's
 * edge: the price of one budget per caller shared by every API process through Redis.
 */
export function rateLimitWindow(limit: RateLimit): { max: number; timeWindowMs: number } {
  return { max: limit.burst, timeWindowMs: Math.max(1, Math.ceil((limit.burst / limit.perSecond) * 1000)) };
}

/**
 * Registers @fastify/rate-limit on its Redis store (the API's producer connection, keys under
 * `RedisNames.rateLimitNamespace`), so every API process of a deployment spends the same
 * budget. The key is the authenticated token id, or the client address for a request with no
 * (valid) token. Nothing is limited by itself (`global: false`): the returned limiter is run
 * where the caller is known (plugins/authenticate.ts) and by the open documentation routes.
 * When Redis does not answer, requests go through (`skipOnError`): the API keeps serving from
 * Postgres while its readiness reports Redis down. Undefined when the limit is off.
 */
export async function installRateLimit(
  app: FastifyInstance,
  opts: { limit: RateLimit; redis: RedisClient; names: RedisNames },
): Promise<RequestLimiter | undefined> {
  if (opts.limit.perSecond <= 0) return undefined;
  const { names } = opts;
  const { max, timeWindowMs } = rateLimitWindow(opts.limit);
  await app.register(rateLimitPlugin, {
    global: false,
    redis: opts.redis,
    nameSpace: names.rateLimitNamespace,
    max,
    timeWindow: timeWindowMs,
    skipOnError: true,
    keyGenerator: (request) =>
      request.caller ? names.rateLimitSubject('token', request.caller.tokenId) : names.rateLimitSubject('ip', request.ip),
    errorResponseBuilder: (_request, context) => {
      const wait = Math.max(1, Math.ceil(context.ttl / 1000));
      return new BatonError('rate_limited', `too many requests from this caller; retry in ${wait} s`, { retryAfterSeconds: wait });
    },
  });
  return app.rateLimit() as RequestLimiter;
}
