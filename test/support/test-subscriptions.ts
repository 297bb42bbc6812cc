import type { SUBSCRIPTION_DEFAULTS } from '../../libs/config/component-defaults.ts';
import type { SubscriptionCounters } from '../../libs/handoffs/subscription-dispatcher.ts';
import { startSubscriptions } from '../../workers/timers/start-subscriptions.ts';
import type { TestBaton } from './test-baton.ts';

/** A worker's subscription dispatcher over the test Baton's Postgres and Redis, with shortened tunables. */
export function startTestSubscriptions(
  baton: TestBaton,
  workerId: string,
  tunables: Partial<typeof SUBSCRIPTION_DEFAULTS>,
  counters?: SubscriptionCounters,
): ReturnType<typeof startSubscriptions> {
  return startSubscriptions({
    repos: baton.repos,
    redis: baton.redis,
    redisPrefix: baton.prefix,
    clock: { now: () => new Date() },
    logger: baton.logger,
    workerId,
    addresses: 'no-private',
    counters,
    tunables,
  });
}
