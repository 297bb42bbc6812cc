import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startPrivateRedis } from '../../services/cli/embedded-infra.ts';
import { TEST_REDIS_URL, databaseUrl } from '../support/env.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { createTestDatabase } from '../support/test-database.ts';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
const running: BatonProcess[] = [];

/** A `baton` process that must exit by itself: resolves with its code, or null if it was still running after `ms`. */
async function exitWithin(p: BatonProcess, ms: number): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([p.exited(), new Promise<'running'>((r) => (timer = setTimeout(() => r('running'), ms)))]);
  clearTimeout(timer);
  return code === 'running' ? null : code;
}

/** A stack trace line, as Node prints them. */
const STACK = /^\s+at .+:\d+:\d+\)?$/m;

function serve(env: Record<string, string>): BatonProcess {
  const p = spawnBaton(['serve'], { REDIS_URL: TEST_REDIS_URL, BATON_REDIS_PREFIX: `t-${randomBytes(4).toString('hex')}`, BATON_LOG_LEVEL: 'info', ...env });
  running.push(p);
  return p;
}

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop('SIGKILL')));
  await db?.drop();
});

describe('starting `baton serve` where it cannot run', () => {
  it('a second serve on a busy port exits 1 with one clear line, and starts no worker', async () => {
    const port = String(await freePort());
    const first = serve({ DATABASE_URL: db.url, BATON_API_PORT: port });
    await first.waitFor(/Baton API on/, 30_000);
    const second = serve({ DATABASE_URL: db.url, BATON_API_PORT: port });
    const code = await exitWithin(second, 20_000);
    expect(code, `a second serve on a busy port must exit 1:\n${second.output()}`).toBe(1);
    expect(second.output()).toMatch(new RegExp(`cannot start: 127\\.0\\.0\\.1:${port} is already in use.*BATON_API_PORT`));
    expect(second.output(), 'no stack trace').not.toMatch(STACK);
    expect(second.output(), 'no worker started when the API cannot listen').not.toMatch(/delivery worker started/);
    expect(await first.stop('SIGTERM')).toBe(0);
  }, 60_000);

  it('a database that does not exist: exit 1, one line with the createdb command', async () => {
    const missing = `baton_missing_${randomBytes(4).toString('hex')}`;
    const p = serve({ DATABASE_URL: databaseUrl(missing), BATON_API_PORT: String(await freePort()) });
    expect(await exitWithin(p, 20_000), p.output()).toBe(1);
    expect(p.output()).toMatch(new RegExp(`cannot start: database "${missing}" does not exist.*createdb -h 127\\.0\\.0\\.1 -p 5432 -U postgres ${missing}`));
    expect(p.output(), 'no stack trace').not.toMatch(STACK);
  }, 30_000);

  it('an unreachable Postgres: exit 1, one line naming the URL', async () => {
    const port = await freePort();
    const p = serve({ DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/baton`, BATON_API_PORT: String(await freePort()) });
    expect(await exitWithin(p, 20_000), p.output()).toBe(1);
    expect(p.output()).toMatch(new RegExp(`cannot start: cannot reach Postgres at postgres@127\\.0\\.0\\.1:${port}/baton .*DATABASE_URL`));
    expect(p.output(), 'no stack trace').not.toMatch(STACK);
  }, 30_000);

  it('a redis+cluster:// URL naming a single Redis server: exit 1, one line saying to use redis://', async () => {
    const single = new URL(TEST_REDIS_URL);
    const p = serve({ DATABASE_URL: db.url, REDIS_URL: `redis+cluster://${single.host}`, BATON_API_PORT: String(await freePort()) });
    expect(await exitWithin(p, 20_000), p.output()).toBe(1);
    expect(p.output()).toMatch(/cannot start: REDIS_URL names a Redis Cluster \(redis\+cluster:\/\/\) but .* is a single Redis server .*use redis:\/\//);
    expect(p.output(), 'no stack trace').not.toMatch(STACK);
  }, 30_000);
});

describe('stopping `baton serve`', () => {
  it('with Redis down, SIGTERM ends the process within BATON_SHUTDOWN_GRACE_MS (force-closing what hangs), no second signal needed', async () => {
    const redis = await startPrivateRedis();
    let redisStopped = false;
    try {
      const graceMs = 1_500;
      const p = serve({ DATABASE_URL: db.url, REDIS_URL: redis.url, BATON_API_PORT: String(await freePort()), BATON_SHUTDOWN_GRACE_MS: String(graceMs) });
      await p.waitFor(/delivery worker started/, 30_000);
      // The unnamed pool is named as people know it (it was logged as "").
      expect(p.output().split('\n').find((l) => l.includes('delivery worker started'))).toMatch(/pools[^\n]*default/);
      await p.waitFor(/Baton API on/, 30_000);
      await redis.stop();
      redisStopped = true;
      await p.waitFor(/redis connection error/, 10_000);
      const t0 = Date.now();
      p.child.kill('SIGTERM');
      const code = await exitWithin(p, graceMs + 5_000);
      const took = Date.now() - t0;
      expect(code, `still running ${graceMs + 5_000} ms after SIGTERM:\n${p.output().slice(-3000)}`).not.toBeNull();
      expect(took, 'the grace bounds the whole shutdown (plus process exit)').toBeLessThan(graceMs + 3_000);
      expect(p.output()).toMatch(/stopping/);
    } finally {
      if (!redisStopped) await redis.stop();
    }
  }, 60_000);
});
