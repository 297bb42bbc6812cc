import { setTimeout as sleep } from 'node:timers/promises';
import { isDatabaseUnavailable } from '../../libs/db/classify-error.ts';
import { pingPostgres } from '../../libs/db/open-database.ts';
import { pingRedis } from '../../libs/queue/open-redis.ts';
import { isRedisConnectionError } from '../../libs/queue/redis-link.ts';
import { parseRedisTarget } from '../../libs/config/redis-target.ts';
import { CLI_DEFAULTS } from '../../libs/config/component-defaults.ts';
import { describeUrl, postgresStartupError, StartupError, UNREACHABLE } from './startup-error.ts';

/**
 * Tries `ping` until it answers, with back-off, while `retryable` says the failure may pass,
 * until `deadline`: the last try is at the deadline, so a server that never answers was waited
 * for the whole time.
 */
async function untilAnswered(
  ping: (timeoutMs: number) => Promise<void>,
  retryable: (err: unknown) => boolean,
  deadline: number,
  signal: AbortSignal,
): Promise<void> {
  let pause = 100;
  for (;;) {
    try {
      await ping(Math.max(100, deadline - Date.now()));
      return;
    } catch (err) {
      if (signal.aborted || !retryable(err) || Date.now() >= deadline) throw err;
    }
    await sleep(Math.min(pause, deadline - Date.now()), undefined, { signal });
    pause = Math.min(pause * 2, CLI_DEFAULTS.startRetryMaxMs);
  }
}

/** What a failed try says, shortly: its code, or the first line of its message. */
function reason(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e?.code === 'string') return e.code;
  return String(e?.message ?? err).split('\n')[0] ?? '';
}

/** A Postgres that may yet answer: unreachable, starting up (57P03), a connection cut or timed out. */
function postgresMayAnswer(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  if (typeof code === 'string') return UNREACHABLE.has(code) || code === '57P03';
  return isDatabaseUnavailable(err) || /timeout/i.test(String((err as Error)?.message));
}

/** host:port of REDIS_URL (each seed node's of a cluster), never its password. */
function redisWhere(url: string): string {
  const target = parseRedisTarget(url);
  return target.kind === 'cluster' ? target.nodes.map((n) => `${n.host}:${n.port}`).join(',') : describeUrl(url);
}

/**
 * Waits until Postgres and Redis both answer, side by side, for at most `timeoutMs`
 * (BATON_START_TIMEOUT_MS). A server that refuses connections or does not answer is tried again
 * with back-off (it may be starting, as under docker compose); one that answers with a refusal
 * that waiting cannot mend (no such database, a refused login) ends the wait at once.
 * @throws StartupError (one line: which server, for how long, what to check).
 */
export async function awaitDependencies(opts: { databaseUrl: string; redisUrl: string; timeoutMs: number }): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  const within = `within ${opts.timeoutMs / 1000} s`;
  const stop = new AbortController();
  const postgres = untilAnswered((ms) => pingPostgres(opts.databaseUrl, ms), postgresMayAnswer, deadline, stop.signal).catch(
    (err: unknown) => {
      if (!postgresMayAnswer(err)) throw postgresStartupError(err, opts.databaseUrl);
      throw new StartupError(
        `cannot reach Postgres at ${describeUrl(opts.databaseUrl)} ${within} (${reason(err)}): is it running? Check DATABASE_URL, or wait longer with BATON_START_TIMEOUT_MS`,
        { cause: err },
      );
    },
  );
  const redis = untilAnswered(
    (ms) => pingRedis(opts.redisUrl, ms),
    (err) => isRedisConnectionError(err) || /timed? ?out/i.test(reason(err)),
    deadline,
    stop.signal,
  ).catch((err: unknown) => {
    const where = redisWhere(opts.redisUrl);
    if (!isRedisConnectionError(err) && !/timed? ?out/i.test(reason(err)))
      throw new StartupError(`Redis at ${where} refused: ${reason(err)}; check REDIS_URL (user, password, database)`, { cause: err });
    throw new StartupError(
      `cannot reach Redis at ${where} ${within} (${reason(err)}): is it running? Check REDIS_URL, or wait longer with BATON_START_TIMEOUT_MS`,
      { cause: err },
    );
  });
  try {
    await Promise.all([postgres, redis]);
  } finally {
    // The first failure ends the other's wait too (no timer left to hold the exit).
    stop.abort();
    await Promise.allSettled([postgres, redis]);
  }
}
