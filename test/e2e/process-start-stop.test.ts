import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startPrivateRedis } from '../../libs/processes/embedded-infra.ts';
import { TEST_REDIS_URL, databaseUrl } from '../support/env.ts';
import { eventually } from '../support/eventually.ts';
import { scratchDir } from '../support/scratch-dir.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTcpProxy } from '../support/tcp-proxy.ts';
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

function serve(env: Record<string, string>, command: 'serve' | 'api' | 'worker' = 'serve'): BatonProcess {
  const p = spawnBaton([command], {
    REDIS_URL: TEST_REDIS_URL,
    BATON_REDIS_PREFIX: `t-${randomBytes(4).toString('hex')}`,
    BATON_LOG_LEVEL: 'info',
    ...env,
  });
  running.push(p);
  return p;
}

/** The non-empty lines a process printed. */
const linesOf = (p: BatonProcess) =>
  p
    .output()
    .split('\n')
    .filter((l) => l.trim() !== '');

/** A TCP server that holds a port (a busy port, or a "Redis" that accepts and hangs up at once), and its connections. */
async function holdPort(onConnection: (socket: net.Socket) => void = () => undefined): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** The start wait (BATON_START_TIMEOUT_MS) these tests give, short so that a failing start ends soon. */
const START_TIMEOUT_MS = 1_500;
/** What a process may take on a loaded machine to load and exit, around the start wait. */
const PROCESS_MARGIN_MS = 20_000;

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
    expect(p.output()).toMatch(
      new RegExp(`cannot start: database "${missing}" does not exist.*createdb -h 127\\.0\\.0\\.1 -p 5432 -U postgres ${missing}`),
    );
    expect(p.output(), 'no stack trace').not.toMatch(STACK);
  }, 30_000);

  it.each(['serve', 'api', 'worker'] as const)(
    'an unreachable Postgres: `%s` tries for BATON_START_TIMEOUT_MS, then exits 1 with one line naming the URL',
    async (command) => {
      const port = await freePort();
      const t0 = Date.now();
      const p = serve(
        {
          DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/baton`,
          BATON_API_PORT: String(await freePort()),
          BATON_START_TIMEOUT_MS: String(START_TIMEOUT_MS),
        },
        command,
      );
      expect(await exitWithin(p, START_TIMEOUT_MS + PROCESS_MARGIN_MS), p.output()).toBe(1);
      expect(Date.now() - t0, 'it waited for Postgres the whole start timeout').toBeGreaterThanOrEqual(START_TIMEOUT_MS);
      expect(linesOf(p), 'one line, nothing else').toHaveLength(1);
      expect(p.output()).toMatch(
        new RegExp(
          `^cannot start: cannot reach Postgres at postgres@127\\.0\\.0\\.1:${port}/baton within 1\\.5 s \\(ECONNREFUSED\\).*DATABASE_URL.*BATON_START_TIMEOUT_MS`,
        ),
      );
    },
    START_TIMEOUT_MS + PROCESS_MARGIN_MS + 10_000,
  );

  it.each(['serve', 'api', 'worker'] as const)(
    'an unreachable Redis: `%s` tries for BATON_START_TIMEOUT_MS, then exits 1 with one line naming it (no API line, no worker errors)',
    async (command) => {
      const port = await freePort();
      const t0 = Date.now();
      const p = serve(
        {
          DATABASE_URL: db.url,
          REDIS_URL: `redis://127.0.0.1:${port}`,
          BATON_API_PORT: String(await freePort()),
          BATON_START_TIMEOUT_MS: String(START_TIMEOUT_MS),
        },
        command,
      );
      expect(await exitWithin(p, START_TIMEOUT_MS + PROCESS_MARGIN_MS), `must exit by itself:\n${p.output().slice(-3000)}`).toBe(1);
      expect(Date.now() - t0, 'it waited for Redis the whole start timeout').toBeGreaterThanOrEqual(START_TIMEOUT_MS);
      expect(linesOf(p), 'one line, nothing else').toHaveLength(1);
      expect(p.output()).toMatch(
        new RegExp(
          `^cannot start: cannot reach Redis at 127\\.0\\.0\\.1:${port} within 1\\.5 s \\(ECONNREFUSED\\).*REDIS_URL.*BATON_START_TIMEOUT_MS`,
        ),
      );
    },
    START_TIMEOUT_MS + PROCESS_MARGIN_MS + 10_000,
  );

  it(
    'a busy port is reported before anything is connected: one line, however long Postgres and Redis would take',
    async () => {
      const held = await holdPort();
      try {
        // Neither answers: a start that reached them would wait the whole minute, or print their errors.
        const p = serve({
          DATABASE_URL: `postgresql://postgres@127.0.0.1:${await freePort()}/baton`,
          REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
          BATON_API_PORT: String(held.port),
          BATON_START_TIMEOUT_MS: '60000',
        });
        expect(await exitWithin(p, PROCESS_MARGIN_MS), p.output()).toBe(1);
        expect(linesOf(p), 'one line, nothing else').toEqual([
          `cannot start: 127.0.0.1:${held.port} is already in use (another \`baton serve\` or \`baton api\`?): stop it, or set BATON_API_PORT`,
        ]);
      } finally {
        await held.close();
      }
    },
    PROCESS_MARGIN_MS + 10_000,
  );

  it(
    'the start waits for Redis without a word, and Ctrl+C then ends it at once, not after BATON_START_TIMEOUT_MS or the grace',
    async () => {
      // A "Redis" that hangs up on every connection: the start keeps trying, and each try shows here.
      let firstTry: number | undefined;
      const redis = await holdPort((socket) => {
        firstTry ??= Date.now();
        socket.destroy();
      });
      try {
        const p = serve({
          DATABASE_URL: db.url,
          REDIS_URL: `redis://127.0.0.1:${redis.port}`,
          BATON_API_PORT: String(await freePort()),
          BATON_START_TIMEOUT_MS: '120000',
          BATON_SHUTDOWN_GRACE_MS: '120000',
        });
        // Trying for a few seconds: long enough for a start that did not wait to have printed its API line and errors.
        await eventually(() => expect(firstTry !== undefined && Date.now() - firstTry >= 4_000, 'Redis tried for 4 s').toBe(true), {
          timeoutMs: PROCESS_MARGIN_MS,
          what: 'Redis tried for 4 s',
        });
        expect(p.output(), 'still waiting for Redis, silently').toBe('');
        const t0 = Date.now();
        p.child.kill('SIGINT');
        const ended = await Promise.race([p.exited().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 10_000))]);
        expect(ended, `still running 10 s after SIGINT:\n${p.output()}`).toBe(true);
        expect(Date.now() - t0).toBeLessThan(10_000);
        expect(p.output(), 'nothing started').not.toMatch(/Baton API on|delivery worker started/);
      } finally {
        await redis.close();
      }
    },
    PROCESS_MARGIN_MS + 30_000,
  );

  it('a redis+cluster:// URL naming a single Redis server: exit 1, one line saying to use redis://', async () => {
    const single = new URL(TEST_REDIS_URL);
    const p = serve({ DATABASE_URL: db.url, REDIS_URL: `redis+cluster://${single.host}`, BATON_API_PORT: String(await freePort()) });
    expect(await exitWithin(p, 20_000), p.output()).toBe(1);
    expect(p.output()).toMatch(
      /cannot start: REDIS_URL names a Redis Cluster \(redis\+cluster:\/\/\) but .* is a single Redis server .*use redis:\/\//,
    );
    expect(p.output(), 'no stack trace').not.toMatch(STACK);
  }, 30_000);
});

describe('stopping `baton serve`', () => {
  it('with Redis down, SIGTERM ends the process at once (force-closing), not after BATON_SHUTDOWN_GRACE_MS, no second signal needed', async () => {
    const redis = await startPrivateRedis();
    let redisStopped = false;
    try {
      // Far longer than the process needs to exit: waiting for it would show.
      const graceMs = 120_000;
      const p = serve({
        DATABASE_URL: db.url,
        REDIS_URL: redis.url,
        BATON_API_PORT: String(await freePort()),
        BATON_SHUTDOWN_GRACE_MS: String(graceMs),
      });
      await p.waitFor(/delivery worker started/, 30_000);
      // The unnamed pool is named as people know it (it was logged as "").
      expect(
        p
          .output()
          .split('\n')
          .find((l) => l.includes('delivery worker started')),
      ).toMatch(/pools[^\n]*default/);
      await p.waitFor(/Baton API on/, 30_000);
      await redis.stop();
      redisStopped = true;
      await p.waitFor(/redis connection lost/, 10_000);
      const t0 = Date.now();
      p.child.kill('SIGTERM');
      const code = await exitWithin(p, PROCESS_MARGIN_MS);
      const took = Date.now() - t0;
      expect(code, `still running ${PROCESS_MARGIN_MS} ms after SIGTERM:\n${p.output().slice(-3000)}`).toBe(1);
      expect(took, 'no wait for the grace with Redis away').toBeLessThan(PROCESS_MARGIN_MS);
      expect(p.output()).toMatch(/stopping/);
      expect(p.output()).toMatch(/redis is unreachable: force-closing without waiting for the grace/);
    } finally {
      if (!redisStopped) await redis.stop();
    }
  }, 60_000);
});

/** A JSON log line's level and message (null for lines that are not pino's). */
function logLine(line: string): { level: number; msg: string } | null {
  try {
    const rec = JSON.parse(line) as { level?: unknown; msg?: unknown };
    return typeof rec.level === 'number' ? { level: rec.level, msg: String(rec.msg) } : null;
  } catch {
    return null;
  }
}

/**
 * `baton serve` on a fresh database of its own (the API's first start on it writes the admin token
 * into a home of its own; reached on `postgresPort`, a proxy, when given) with two demo agents,
 * and a caller of its API. Debug lines on: the
 * tests count the quiet reconnect attempts, so the quiet is not for want of tries.
 */
async function serveWithAgents(env: Record<string, string>, postgresPort?: number) {
  const fresh = await createTestDatabase();
  const url = new URL(fresh.url);
  if (postgresPort !== undefined) url.port = String(postgresPort);
  const home = scratchDir('baton-outage-');
  const apiPort = await freePort();
  const p = serve({ DATABASE_URL: url.toString(), BATON_API_PORT: String(apiPort), BATON_HOME: home, BATON_LOG_LEVEL: 'debug', ...env });
  await p.waitFor(/Baton API on/, 30_000);
  const token = readFileSync(join(home, 'admin.token'), 'utf8').trim();
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${apiPort}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json().catch(() => null)) as { id?: string; state?: string } | null };
  };
  const suffix = randomBytes(3).toString('hex');
  const [from, to] = [`from-${suffix}`, `to-${suffix}`];
  for (const id of [from, to])
    expect((await call('POST', '/v1/agents', { id, provider: 'demo', settings: { thinkMs: 50 } })).status).toBe(201);
  // Their audit rows are written after the answers: an outage must not begin under them.
  const audited = async () =>
    ((await call('GET', '/v1/audit?limit=10')).body as { items?: Array<{ route: string }> } | null)?.items?.filter(
      (r) => r.route === '/v1/agents',
    ).length;
  await eventually(async () => expect(await audited()).toBe(2), { timeoutMs: 10_000, what: 'the agents audited' });
  return {
    p,
    call,
    fresh,
    /** Debug lines with this message printed since `from` lines. */
    debugCount: (since: number, msg: string) =>
      linesOf(p)
        .slice(since)
        .map(logLine)
        .filter((l) => l?.level === 20 && l.msg === msg).length,
    /** A handoff sent now is delivered and returned: the process works. */
    async delivers() {
      const sent = await call('POST', '/v1/handoffs', { from, to, message: 'after the outage', title: 'after' });
      expect(sent.status).toBe(201);
      await eventually(async () => expect((await call('GET', `/v1/handoffs/${sent.body!.id}`)).body?.state).toBe('RETURNED'), {
        timeoutMs: 30_000,
        what: 'the handoff RETURNED',
      });
    },
  };
}

/** What an outage showed above debug: its lost line, its restored line, and nothing else (no stack, no line per connection or try). */
function expectOneLineEach(outage: string[], lost: RegExp, restored: RegExp): void {
  const shown = outage.map((l) => logLine(l) ?? { level: 99, msg: l }).filter((l) => l.level >= 30);
  const listed = shown.map((l) => `${l.level} ${l.msg}`).join('\n');
  expect(
    shown.filter((l) => lost.test(l.msg)),
    `one line when it goes:\n${listed}`,
  ).toHaveLength(1);
  expect(
    shown.filter((l) => restored.test(l.msg)),
    `one line when it is back:\n${listed}`,
  ).toHaveLength(1);
  expect(
    shown.filter((l) => l.level >= 40),
    `the lost line is the only warning:\n${listed}`,
  ).toHaveLength(1);
  expect(shown.length, listed).toBeLessThanOrEqual(3);
  expect(outage.filter((l) => (logLine(l)?.level ?? 99) >= 30).join('\n'), 'no stack trace shown').not.toMatch(/"stack"|^\s+at /m);
}

describe('a dependency going away while `baton serve` runs', () => {
  it('Redis: one warning when it goes and one line when it is back (no flood of errors or stacks), and the process delivers again', async () => {
    let redis = await startPrivateRedis();
    const redisPort = Number(new URL(redis.url).port);
    let fresh: { drop(): Promise<void> } | undefined;
    try {
      const s = await serveWithAgents({ REDIS_URL: redis.url });
      fresh = s.fresh;
      const before = linesOf(s.p).length;
      await redis.stop();
      await s.p.waitFor(/redis connection lost/, 10_000);
      // Its connections keep trying, at debug only: wait for a good many tries.
      await eventually(() => expect(s.debugCount(before, 'redis connection error')).toBeGreaterThanOrEqual(10), {
        timeoutMs: 30_000,
        what: 'reconnect attempts',
      });
      redis = await startPrivateRedis({ port: redisPort });
      await s.p.waitFor(/redis connection restored/, 30_000);
      expectOneLineEach(linesOf(s.p).slice(before), /^redis connection lost/, /^redis connection restored$/);
      await s.delivers();
      expect(await s.p.stop('SIGTERM')).toBe(0);
    } finally {
      await redis.stop();
      await Promise.all(running.map((p) => p.stop('SIGKILL')));
      await fresh?.drop();
    }
  }, 120_000);

  it('Postgres: one warning when it goes and one line when it is back, requests answered 503 meanwhile without an error line each, and the process delivers again', async () => {
    const target = new URL(db.url);
    const proxy = await startTcpProxy(Number(target.port || 5432), target.hostname);
    let fresh: { drop(): Promise<void> } | undefined;
    try {
      const s = await serveWithAgents({ REDIS_URL: TEST_REDIS_URL }, proxy.port);
      fresh = s.fresh;
      const before = linesOf(s.p).length;
      await proxy.cut();
      await s.p.waitFor(/postgres connection lost/, 10_000);
      // Callers are told to come back (503), and the reconciler keeps trying, at debug only.
      for (let i = 0; i < 3; i++) expect((await s.call('GET', '/v1/handoffs')).status).toBe(503);
      await eventually(() => expect(s.debugCount(before, 'postgres connection error')).toBeGreaterThanOrEqual(5), {
        timeoutMs: 30_000,
        what: 'connection attempts',
      });
      await proxy.restore();
      await s.p.waitFor(/postgres connection restored/, 30_000);
      expectOneLineEach(linesOf(s.p).slice(before), /^postgres connection lost/, /^postgres connection restored$/);
      await s.delivers();
      expect(await s.p.stop('SIGTERM')).toBe(0);
    } finally {
      await Promise.all(running.map((p) => p.stop('SIGKILL')));
      await proxy.close();
      await fresh?.drop();
    }
  }, 120_000);
});
