import type { Logger } from '../logging/create-logger.ts';
import type { RedisClient } from './open-redis.ts';
import type { RedisNames } from './redis-names.ts';

/**
 * "A token may have ended" (a revocation, an agent removed, a project deleted), announced over
 * Redis pub/sub on `<prefix>:{auth}:changed` to every API process of the deployment, so their
 * token caches (libs/handoffs/token-cache.ts) forget what they hold within milliseconds.
 *
 * The subscriber has a connection of its own (a subscribed connection can send nothing else).
 * Whenever its subscription is (re)established it calls `onChange` too: announcements made
 * while it was away are lost, so the cache starts over. Announcing never throws: a lost
 * announcement is bounded by the cache's own expiry.
 */
export class AuthChanges {
  private readonly channel: string;
  private closed = false;

  constructor(
    private readonly opts: {
      readonly publisher: RedisClient;
      /** A dedicated connection; closed by close(). */
      readonly subscriber: RedisClient;
      readonly names: RedisNames;
      readonly logger: Logger;
    },
  ) {
    this.channel = opts.names.authChanged();
  }

  /** Subscribes; `onChange` runs on every announcement and on every (re)subscription. */
  async start(onChange: () => void): Promise<void> {
    const { subscriber, logger } = this.opts;
    subscriber.on('message', (channel: string) => {
      if (channel === this.channel) onChange();
    });
    subscriber.on('ready', () => {
      if (this.closed) return;
      // ioredis re-subscribes by itself after a reconnect; what was announced meanwhile is lost.
      onChange();
    });
    subscriber.on('error', (err: unknown) => logger.debug({ err }, 'auth change subscription error'));
    await subscriber.subscribe(this.channel).catch((err: unknown) => {
      logger.warn({ err }, 'could not subscribe to token changes; cached tokens expire within a second');
    });
  }

  announce(): void {
    this.opts.publisher.publish(this.channel, '1').catch((err: unknown) => {
      this.opts.logger.warn({ err }, 'could not announce a token change; other processes notice within a second');
    });
  }

  close(): void {
    this.closed = true;
    this.opts.subscriber.disconnect();
  }
}
