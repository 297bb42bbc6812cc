import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Clock } from '../../libs/domain/clock.ts';
import type { Database } from '../../libs/db/open-database.ts';
import { createRepositories } from '../../libs/db/repositories.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';
import { DeliveryQueues } from '../../libs/queue/delivery-queues.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { TurnLocks } from '../../libs/locks/turn-locks.ts';
import { buildApp } from './app.ts';
import type { RateLimit } from '../../libs/domain/rate-limit.ts';

export interface ApiServerOptions {
  readonly db: Database;
  /** A producer connection (fails fast when Redis is down). */
  readonly redis: Redis;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly host: string;
  readonly port: number;
  readonly redisPrefix: string;
  readonly queueShards: number;
  readonly defaultProject: string;
  /** Per-token request rate (perSecond 0 turns it off). */
  readonly rateLimit?: RateLimit | undefined;
}

export interface RunningApi {
  readonly app: FastifyInstance;
  readonly url: string;
  /** Stops accepting requests, lets in-flight ones finish, closes the producer queues. */
  close(): Promise<void>;
}

/** Builds the app from real dependencies and listens; a failed listen (EADDRINUSE) closes the app and its queues and rethrows. */
export async function startApiServer(opts: ApiServerOptions): Promise<RunningApi> {
  const names = new RedisNames(opts.redisPrefix);
  const locks = new TurnLocks(opts.redis, names, { ttlMs: 1, logger: opts.logger });
  const queues = new DeliveryQueues({
    connection: opts.redis,
    names,
    shards: opts.queueShards,
    logger: opts.logger,
    heldLocks: (ids) => locks.held(ids),
  });
  const repos = createRepositories(opts.db);
  const core = { ...repos, scheduler: queues, clock: opts.clock, logger: opts.logger };
  const app = await buildApp({
    core,
    turnReports: repos.turnReports,
    defaultProject: opts.defaultProject,
    logger: opts.logger,
    rateLimit: opts.rateLimit,
    checks: {
      database: async () => {
        await opts.db.pool.query('SELECT 1');
      },
      redis: async () => {
        await opts.redis.ping();
      },
    },
  });
  let address: string;
  try {
    address = await app.listen({ host: opts.host, port: opts.port });
  } catch (err) {
    // A busy port: leave nothing open behind the error, so the caller can exit cleanly.
    await app.close().catch(() => undefined);
    await queues.close().catch(() => undefined);
    throw err;
  }
  opts.logger.info({ url: address }, 'api listening');
  return {
    app,
    url: address.replace('0.0.0.0', '127.0.0.1').replace('[::]', '127.0.0.1'),
    async close() {
      await app.close();
      await queues.close();
    },
  };
}
