import { createSignedPoster } from '../../libs/adapters/webhook/signed-post.ts';
import type { Clock } from '../../libs/domain/clock.ts';
import type { SubscriptionAddressPolicy } from '../../libs/domain/subscription-policy.ts';
import type { Repositories } from '../../libs/db/repositories.ts';
import { SubscriptionDispatcher, type SubscriptionCounters } from '../../libs/handoffs/subscription-dispatcher.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import { createEventStreamReader } from '../../libs/queue/event-stream.ts';
import { duplicateRedis, type RedisClient } from '../../libs/queue/open-redis.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { SUBSCRIPTION_DEFAULTS } from '../../libs/config/component-defaults.ts';

/**
 * Starts the subscription dispatcher of a worker process: it follows the event log (woken by
 * the event stream, on a connection of its own, and every SUBSCRIPTION_DEFAULTS.checkEveryMs)
 * and POSTs each subscription's events. Every worker runs one; the lease on each subscription's
 * row makes one of them its deliverer at a time.
 */
export function startSubscriptions(opts: {
  repos: Pick<Repositories, 'eventLog' | 'subscriptions' | 'handoffs'>;
  redis: RedisClient;
  redisPrefix: string;
  clock: Clock;
  logger: Logger;
  workerId: string;
  addresses: SubscriptionAddressPolicy;
  counters?: SubscriptionCounters;
  tunables?: Partial<typeof SUBSCRIPTION_DEFAULTS>;
}): { dispatcher: SubscriptionDispatcher; stop(): Promise<void> } {
  const t = { ...SUBSCRIPTION_DEFAULTS, ...opts.tunables };
  const poster = createSignedPoster({ policy: opts.addresses, timeoutMs: t.requestTimeoutMs, errorChars: t.errorChars });
  const dispatcher = new SubscriptionDispatcher({
    log: opts.repos.eventLog,
    subscriptions: opts.repos.subscriptions,
    handoffs: opts.repos.handoffs,
    poster,
    clock: opts.clock,
    logger: opts.logger,
    workerId: opts.workerId,
    counters: opts.counters,
    tunables: t,
  });
  const connection = duplicateRedis(opts.redis, {
    connectionName: 'baton-subscriptions',
    maxRetriesPerRequest: null,
    commandTimeout: 15_000,
  });
  connection.on('error', (err) => opts.logger.debug({ err }, 'subscription stream connection error'));
  const reader = createEventStreamReader(connection, new RedisNames(opts.redisPrefix), opts.logger);
  dispatcher.start({
    start: (onWake) => reader.start(onWake),
    close: () => {
      reader.close();
      connection.disconnect();
    },
  });
  return {
    dispatcher,
    async stop() {
      await dispatcher.stop();
      await poster.close();
    },
  };
}
