import type { RedisClient } from './open-redis.ts';
import type { Logger } from '../logging/create-logger.ts';
import type { RedisNames } from './redis-names.ts';
import { REDIS_EVENT_STREAM_DEFAULTS } from '../config/component-defaults.ts';

/**
 * The writers' side of the event stream (`<prefix>:{events}:stream`): after statements that
 * appended handoff events committed, one XADD per turn of the event loop with the highest new
 * event id (`top`) and how many rows they wrote. It never throws and nobody awaits it: the
 * stream only wakes the API processes, which read the events themselves from Postgres, so a
 * lost append delays a follower until the next append (or its periodic check) and loses
 * nothing.
 */
export class EventStreamPublisher {
  private readonly key: string;

  constructor(
    private readonly redis: RedisClient,
    names: RedisNames,
    private readonly logger: Logger,
    private readonly maxLen = REDIS_EVENT_STREAM_DEFAULTS.maxLen,
  ) {
    this.key = names.eventStream();
  }

  /** What was published in this turn of the event loop and is not appended yet. */
  private pending: { top: bigint; n: number } | null = null;

  /**
   * Appends after the current turn of the event loop, one entry for everything published in
   * it: a worker's many turns ending together (and a turn's end with the next one's
   * reservation, whose events the statement returns apart) cost one XADD.
   */
  published(eventIds: readonly string[]): void {
    if (eventIds.length === 0) return;
    let top = 0n;
    for (const id of eventIds) if (BigInt(id) > top) top = BigInt(id);
    if (this.pending) {
      if (top > this.pending.top) this.pending.top = top;
      this.pending.n += eventIds.length;
      return;
    }
    this.pending = { top, n: eventIds.length };
    setImmediate(() => this.append());
  }

  private append(): void {
    const batch = this.pending;
    this.pending = null;
    if (!batch) return;
    this.redis
      .xadd(this.key, 'MAXLEN', '~', String(this.maxLen), '*', 'top', batch.top.toString(), 'n', String(batch.n))
      .catch((err: unknown) => {
        this.logger.debug({ err }, 'event stream append failed; followers catch up from Postgres');
      });
  }
}

/** A blocking reader of the event stream: `onWake(top)` per batch of entries, `top` the highest event id they name. */
export interface EventStreamReader {
  start(onWake: (top: bigint) => void): void;
  close(): void;
}

/**
 * Reads the event stream with XREAD BLOCK on its own connection (one per API process, whatever
 * the number of followers). After a Redis error it wakes its follower once the connection
 * answers again (`top` 0: "look at Postgres"), since appends may have been lost meanwhile; a
 * deleted or trimmed stream needs nothing: the next append recreates it with later ids.
 */
export function createEventStreamReader(
  connection: RedisClient,
  names: RedisNames,
  logger: Logger,
  blockMs = REDIS_EVENT_STREAM_DEFAULTS.readBlockMs,
): EventStreamReader {
  const key = names.eventStream();
  let closed = false;
  return {
    start(onWake) {
      const loop = async () => {
        let last = '$';
        let failed = false;
        try {
          // Start after the newest entry: what came before is already in Postgres for the follower.
          const newest = (await connection.xrevrange(key, '+', '-', 'COUNT', 1))[0];
          last = newest ? newest[0] : '0-0';
        } catch (err) {
          failed = true;
          logger.debug({ err }, 'event stream not readable yet');
        }
        while (!closed) {
          try {
            const res = await connection.xread('COUNT', REDIS_EVENT_STREAM_DEFAULTS.readCount, 'BLOCK', blockMs, 'STREAMS', key, last);
            if (failed) {
              failed = false;
              onWake(0n);
            }
            const entries = res?.[0]?.[1] ?? [];
            let top = 0n;
            for (const [id, fields] of entries) {
              last = id;
              const at = fields.indexOf('top');
              const value = at >= 0 ? fields[at + 1] : undefined;
              if (value !== undefined && /^\d+$/.test(value) && BigInt(value) > top) top = BigInt(value);
            }
            if (entries.length > 0) onWake(top);
          } catch (err) {
            if (closed) return;
            failed = true;
            logger.debug({ err }, 'event stream read failed; retrying');
            await new Promise((resolve) => setTimeout(resolve, REDIS_EVENT_STREAM_DEFAULTS.readRetryMs).unref());
            if (last === '$') last = '0-0';
          }
        }
      };
      void loop();
    },
    close() {
      closed = true;
      connection.disconnect();
    },
  };
}
