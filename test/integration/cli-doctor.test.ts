import { chmodSync, cpSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERIFIED_CLI_VERSIONS } from '../../libs/adapters/verified-versions.ts';
import { MIGRATIONS_DIR, migrate, readMigrations } from '../../libs/db/migrate.ts';
import { freePort, startPrivateRedis, type Started } from '../../libs/processes/embedded-infra.ts';
import { runCli } from '../../services/cli/program.ts';
import { agentCli, AGENT_CLI_VERSIONS } from '../support/agent-clis.ts';
import { TEST_REDIS_URL, databaseUrl } from '../support/env.ts';
import { withAdmin } from '../support/test-database.ts';
import { clusterUrl } from '../support/redis-targets.ts';
import { scratchDir } from '../support/scratch-dir.ts';
import { runBaton } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * `baton doctor` against the real thing: the test Postgres (a migrated clone, an empty database, a
 * half-migrated one), the machine's Redis, a private redis-server with the wrong eviction policy,
 * the test cluster, an API served over HTTP with an admin token, the real codex and claude CLIs,
 * and ports where nothing listens or something listens and never answers.
 */
interface Check {
  name: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  fix: string | null;
}

let baton: TestBaton;
let apiUrl: string;
/** A PATH holding only `node` (the codex launcher is a node script): no `codex` or `claude` on it. */
let nodeOnlyPath: string;
let webhookServer: HttpServer;
let webhookUrl: string;
const cleanups: Array<() => Promise<void>> = [];

async function doctor(env: Record<string, string>, ...argv: string[]) {
  let out = '';
  let err = '';
  const started = Date.now();
  const code = await runCli(['doctor', ...argv], env, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err, ms: Date.now() - started };
}

/** `baton doctor --json`: its exit code and checks, by name (a name that occurs twice keeps the last). */
async function doctorJson(env: Record<string, string>, ...argv: string[]) {
  const r = await doctor(env, '--json', ...argv);
  const body = JSON.parse(r.out) as { ok: boolean; checks: Check[] };
  return { ...r, body, check: (name: string) => body.checks.find((c) => c.name === name) };
}

/** Everything this file's Baton needs, each part replaceable by a test. */
function envOf(over: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: baton.databaseUrl,
    REDIS_URL: TEST_REDIS_URL,
    BATON_REDIS_PREFIX: baton.prefix,
    BATON_URL: apiUrl,
    BATON_TOKEN: baton.adminToken,
    BATON_HOME: scratchDir('baton-doctor-home-'),
    BATON_WORKER_PROVIDERS: 'demo,codex,claude_code,webhook',
    PATH: nodeOnlyPath,
    HOME: process.env['HOME'] ?? '/tmp',
    ...over,
  };
}

async function addAgent(id: string, provider: string, settings: Record<string, unknown>): Promise<void> {
  const res = await baton.post('/v1/agents', { id, provider, settings });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
}

async function removeAgent(id: string): Promise<void> {
  expect((await baton.del(`/v1/agents/${id}`)).status).toBe(204);
}

/** A port on which something accepts connections and never says a word (a host that hangs). */
async function silentPort(): Promise<number> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => void sockets.push(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as net.AddressInfo).port;
}

/** A database of this test's own, dropped after the file. */
async function scratchDatabase(label: string): Promise<string> {
  const name = `baton_doctor_${label}_${process.pid}_${Date.now() % 100_000}`;
  await withAdmin((c) => c.query(`CREATE DATABASE ${name}`));
  cleanups.push(() => withAdmin(async (c) => void (await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))));
  return databaseUrl(name);
}

beforeAll(async () => {
  baton = await startTestBaton();
  apiUrl = await baton.listen();
  const bin = scratchDir('baton-doctor-bin-');
  symlinkSync(process.execPath, join(bin, 'node'));
  nodeOnlyPath = bin;
  webhookServer = createHttpServer((_req, res) => res.writeHead(405).end());
  await new Promise<void>((resolve) => webhookServer.listen(0, '127.0.0.1', resolve));
  webhookUrl = `http://127.0.0.1:${(webhookServer.address() as net.AddressInfo).port}/turns`;
  const cwd = scratchDir('baton-doctor-cwd-');
  await addAgent('coder', 'codex', { cwd, binary: agentCli('codex') });
  await addAgent('reviewer', 'claude_code', { cwd, binary: agentCli('claude') });
  await addAgent('hook', 'webhook', { url: webhookUrl, secret: 'a-secret-of-sixteen-chars' });
  await addAgent('inbox', 'manual', {});
}, 60_000);

afterAll(async () => {
  // Teardown is best effort: each cleanup runs whatever the one before did.
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  await new Promise<void>((resolve) => (webhookServer ? webhookServer.close(() => resolve()) : resolve()));
  await baton?.stop();
});

describe('baton doctor', () => {
  it('all good: every line ok, the programs with their versions, exit 0', async () => {
    const r = await doctor(envOf());
    expect(r.code, r.out + r.err).toBe(0);
    const lines = r.out.trimEnd().split('\n');
    // One line per check, each starting with its mark; the last line sums them up.
    for (const line of lines.slice(0, -1)) expect(line, r.out).toMatch(/^ok {4}/);
    expect(lines.at(-1)).toMatch(/^\d+ ok, 0 warnings, 0 failed$/);
    for (const name of ['config', 'postgres', 'migrations', 'redis', 'redis maxmemory-policy', 'api', 'token', 'agents']) {
      expect(r.out, `a line for ${name}`).toMatch(new RegExp(`^ok +${name} `, 'm'));
    }
    const migrations = (await readMigrations()).length;
    expect(r.out).toContain(`all ${migrations} migrations applied`);
    expect(r.out).toMatch(/PostgreSQL \d+/);
    expect(r.out).toMatch(/Redis \d+\.\d+\.\d+ at 127\.0\.0\.1:\d+, one server \(not a cluster\)/);
    expect(r.out).toContain('an admin token from BATON_TOKEN');
    expect(r.out).toContain(`4 active in deployment ${baton.prefix} (Postgres)`);
    expect(r.out).toContain(`codex-cli ${AGENT_CLI_VERSIONS.codex} at ${agentCli('codex')}, for default/coder`);
    expect(r.out).toContain(`${AGENT_CLI_VERSIONS.claude} (Claude Code) at ${agentCli('claude')}, for default/reviewer`);
    expect(r.out).toContain(`${webhookUrl} answers (HTTP 405)`);
  }, 60_000);

  it('--json: { ok, checks: [{ name, status, detail, fix }] }, fix null exactly when ok, exit code as ok says', async () => {
    const good = await doctorJson(envOf());
    expect(good.code).toBe(0);
    expect(good.body.ok).toBe(true);
    const bad = await doctorJson(envOf({ BATON_TOKEN: 'not-a-token' }));
    expect(bad.code).toBe(1);
    expect(bad.body.ok).toBe(false);
    for (const { body } of [good, bad]) {
      expect(Object.keys(body).sort()).toEqual(['checks', 'ok']);
      expect(body.checks.length).toBeGreaterThan(8);
      for (const c of body.checks) {
        expect(Object.keys(c).sort()).toEqual(['detail', 'fix', 'name', 'status']);
        expect(['ok', 'warn', 'fail']).toContain(c.status);
        expect(typeof c.detail).toBe('string');
        expect(c.fix === null, `${c.name}: a fix exactly when not ok`).toBe(c.status === 'ok');
      }
    }
    expect(bad.check('token')).toMatchObject({ status: 'fail', detail: 'the token from BATON_TOKEN was refused (unauthenticated)' });
    expect(bad.check('token')?.fix).toContain('baton init');
  }, 60_000);

  it('an unreachable Redis and Postgres: a fail line each with what to do, exit 1, at once', async () => {
    const [redisPort, pgPort] = [await freePort(), await freePort()];
    // A long timeout: a refused connection must not wait for it (the bound below leaves a loaded machine 20 s).
    const timeoutMs = 20_000;
    const r = await doctor(
      envOf({ REDIS_URL: `redis://127.0.0.1:${redisPort}`, DATABASE_URL: `postgresql://postgres@127.0.0.1:${pgPort}/baton` }),
      '--timeout',
      String(timeoutMs),
    );
    expect(r.code).toBe(1);
    expect(r.out).toMatch(
      new RegExp(
        `^fail +redis +cannot reach Redis at 127\\.0\\.0\\.1:${redisPort} \\(.*ECONNREFUSED.*\\) +→ start Redis, or point REDIS_URL at a running one$`,
        'm',
      ),
    );
    expect(r.out).toMatch(
      new RegExp(
        `^fail +postgres +cannot reach Postgres at postgres@127\\.0\\.0\\.1:${pgPort}/baton \\(ECONNREFUSED\\) +→ start Postgres, or point DATABASE_URL at a running one$`,
        'm',
      ),
    );
    // Nothing waits for a refused connection: it fails well within the network timeout.
    expect(r.ms).toBeLessThan(timeoutMs);
    // As a real process, too (the compiled CLI): the same line and exit code 1.
    const p = await runBaton(['doctor'], envOf({ REDIS_URL: `redis://127.0.0.1:${redisPort}` }));
    expect(p.code, p.output).toBe(1);
    expect(p.output).toMatch(/^fail +redis +cannot reach Redis at/m);
  }, 60_000);

  it('an unreachable API: fail with how to start it or point at it; the token is then not checked', async () => {
    const port = await freePort();
    const r = await doctorJson(envOf({ BATON_URL: `http://127.0.0.1:${port}` }));
    expect(r.code).toBe(1);
    expect(r.check('api')).toMatchObject({
      status: 'fail',
      fix: "start it (`baton serve`, or `baton api`), or point BATON_URL, --url or the profile's url at it",
    });
    expect(r.check('api')?.detail).toMatch(new RegExp(`^cannot reach Baton at http://127\\.0\\.0\\.1:${port} \\(.*ECONNREFUSED.*\\)$`));
    expect(r.check('token')).toMatchObject({ status: 'warn', detail: 'not checked (from BATON_TOKEN): the API does not answer' });
    // The database still lists the agents: their programs are checked all the same.
    expect(r.check('agents')?.status).toBe('ok');
  }, 60_000);

  it('a profile others can read: the token fails with the chmod that fixes it', async () => {
    const home = scratchDir('baton-doctor-profile-');
    const profile = join(home, 'profile.json');
    writeFileSync(profile, JSON.stringify({ url: apiUrl, token: baton.adminToken }), { mode: 0o644 });
    chmodSync(profile, 0o644);
    const r = await doctorJson(envOf({ BATON_TOKEN: '', BATON_URL: '', BATON_PROFILE: profile }));
    expect(r.code).toBe(1);
    expect(r.check('token')).toMatchObject({
      status: 'fail',
      detail: `${profile} is readable by others (mode 644); run: chmod 600 ${profile}`,
    });
    expect(r.check('api')?.status).toBe('warn');
    // Once only its owner may read it, the same profile names the API and the token.
    chmodSync(profile, 0o600);
    const fixed = await doctorJson(envOf({ BATON_TOKEN: '', BATON_URL: '', BATON_PROFILE: profile }));
    expect(fixed.check('api')).toMatchObject({ status: 'ok', detail: `Baton at ${apiUrl} answers and is ready` });
    expect(fixed.check('token')).toMatchObject({ status: 'ok', detail: `an admin token from the profile ${profile}, project default` });
  }, 60_000);

  it('a Redis and a Postgres that accept the connection and never answer: failed after --timeout, never hangs', async () => {
    const [redisPort, pgPort] = [await silentPort(), await silentPort()];
    const timeoutMs = 500;
    const r = await doctorJson(
      envOf({ REDIS_URL: `redis://127.0.0.1:${redisPort}`, DATABASE_URL: `postgresql://postgres@127.0.0.1:${pgPort}/baton` }),
      '--timeout',
      String(timeoutMs),
    );
    expect(r.code).toBe(1);
    expect(r.check('redis')).toMatchObject({
      status: 'fail',
      detail: `Redis at 127.0.0.1:${redisPort} gave no answer within ${timeoutMs} ms`,
    });
    expect(r.check('postgres')).toMatchObject({
      status: 'fail',
      detail: `Postgres at postgres@127.0.0.1:${pgPort}/baton gave no answer within ${timeoutMs} ms`,
    });
    expect(r.check('redis')?.fix).toContain('firewall');
  }, 60_000);

  it('a Redis whose maxmemory-policy is not noeviction: fail, with the command that fixes it', async () => {
    let redis: Started;
    try {
      redis = await startPrivateRedis();
    } catch (err) {
      throw new Error(`this test needs redis-server on PATH: ${(err as Error).message}`, { cause: err });
    }
    cleanups.push(() => redis.stop());
    const port = Number(new URL(redis.url).port);
    const client = new Redis(redis.url);
    await client.config('SET', 'maxmemory-policy', 'allkeys-lru');
    await client.quit();
    const r = await doctorJson(envOf({ REDIS_URL: redis.url }));
    expect(r.code).toBe(1);
    expect(r.check('redis')?.status).toBe('ok');
    expect(r.check('redis maxmemory-policy')).toEqual({
      name: 'redis maxmemory-policy',
      status: 'fail',
      detail: `allkeys-lru on 127.0.0.1:${port}: Redis may evict BullMQ's jobs and Baton's turn locks when memory runs short`,
      fix: `\`redis-cli -h 127.0.0.1 -p ${port} config set maxmemory-policy noeviction\`, and \`maxmemory-policy noeviction\` in redis.conf so a restart keeps it`,
    });
  }, 60_000);

  it('a Redis Cluster: said so, with every primary checked; one of its nodes named as a single server fails', async () => {
    const cluster = await doctorJson(envOf({ REDIS_URL: clusterUrl() }));
    expect(cluster.check('redis')).toMatchObject({ status: 'ok' });
    expect(cluster.check('redis')?.detail).toMatch(
      /^Redis \d+\.\d+\.\d+, a cluster of 3 primaries \(cluster_state ok\) via 127\.0\.0\.1:\d+$/,
    );
    expect(cluster.check('redis maxmemory-policy')).toMatchObject({ status: 'ok', detail: 'noeviction on all 3 primaries' });
    const node = clusterUrl()
      .replace(/^redis\+cluster:\/\//, '')
      .split(',')[0]!;
    const single = await doctorJson(envOf({ REDIS_URL: `redis://${node}` }));
    expect(single.code).toBe(1);
    expect(single.check('redis')).toMatchObject({
      status: 'fail',
      fix: `give the cluster's nodes: REDIS_URL=redis+cluster://${node}[,host:port...]`,
    });
  }, 60_000);

  it('missing migrations: an empty database fails, and so does one with only some applied', async () => {
    const known = await readMigrations();
    const empty = await doctorJson(envOf({ DATABASE_URL: await scratchDatabase('empty') }));
    expect(empty.code).toBe(1);
    expect(empty.check('postgres')?.status).toBe('ok');
    expect(empty.check('migrations')).toMatchObject({
      status: 'fail',
      detail: `none of the ${known.length} migrations is applied (an empty database)`,
    });
    expect(empty.check('migrations')?.fix).toContain('baton db migrate');

    // The first three migrations only, as an older Baton would have left it.
    const partialUrl = await scratchDatabase('partial');
    const dir = scratchDir('baton-doctor-migrations-');
    const names = readdirSync(MIGRATIONS_DIR).sort().slice(0, 3);
    for (const n of names) {
      mkdirSync(join(dir, n));
      cpSync(join(MIGRATIONS_DIR, n), join(dir, n), { recursive: true });
    }
    await migrate(partialUrl, dir);
    const partial = await doctorJson(envOf({ DATABASE_URL: partialUrl }));
    expect(partial.code).toBe(1);
    const missing = known.slice(3).map((m) => m.name);
    expect(partial.check('migrations')).toMatchObject({
      status: 'fail',
      detail: `3 of ${known.length} migrations applied; missing ${missing.join(', ')}`,
    });
  }, 60_000);

  it('a missing database: fail with the createdb command', async () => {
    const r = await doctorJson(envOf({ DATABASE_URL: databaseUrl('baton_doctor_nowhere') }));
    expect(r.code).toBe(1);
    expect(r.check('postgres')?.status).toBe('fail');
    expect(r.check('postgres')?.fix).toMatch(
      /^create it with `createdb -h 127\.0\.0\.1 -p \d+ -U postgres baton_doctor_nowhere`, then `baton db migrate`$/,
    );
  }, 60_000);

  it('a codex agent whose codex is not on the PATH: fail, naming the agent and the fix', async () => {
    await addAgent('lost', 'codex', { cwd: scratchDir('baton-doctor-cwd-') });
    try {
      const r = await doctor(envOf());
      expect(r.code).toBe(1);
      expect(r.out).toMatch(
        new RegExp(
          `^fail +codex codex +\`codex\` is not on the PATH \\(${nodeOnlyPath}\\), for default/lost +→ install it \\(\`npm install -g @openai/codex@${AGENT_CLI_VERSIONS.codex}\`\\) where the worker's PATH finds it, or set the agent's \`binary\` setting to its full path$`,
          'm',
        ),
      );
      // The agent whose binary is there is still ok.
      expect(r.out).toMatch(/^ok +codex \/.* +codex-cli /m);
    } finally {
      await removeAgent('lost');
    }
  }, 60_000);

  it('a codex of another version than the verified one: a warning with the verified install; one whose --version fails: fail', async () => {
    const bin = scratchDir('baton-doctor-stubs-');
    // Stand-ins for what --version prints: doctor runs nothing else of them.
    writeFileSync(join(bin, 'old-codex'), '#!/bin/sh\necho "codex-cli 0.100.0"\n', { mode: 0o755 });
    writeFileSync(join(bin, 'broken-claude'), '#!/bin/sh\necho "cannot load" >&2\nexit 3\n', { mode: 0o755 });
    const cwd = scratchDir('baton-doctor-cwd-');
    await addAgent('old', 'codex', { cwd, binary: join(bin, 'old-codex') });
    await addAgent('broken', 'claude_code', { cwd, binary: join(bin, 'broken-claude') });
    try {
      const r = await doctorJson(envOf());
      expect(r.check(`codex ${join(bin, 'old-codex')}`)).toEqual({
        name: `codex ${join(bin, 'old-codex')}`,
        status: 'warn',
        detail: `codex-cli 0.100.0 at ${join(bin, 'old-codex')}, for default/old; Baton's adapter was verified with ${AGENT_CLI_VERSIONS.codex}`,
        fix: `install that version (\`npm install -g @openai/codex@${AGENT_CLI_VERSIONS.codex}\`), or try this one knowing that Baton reads what ${AGENT_CLI_VERSIONS.codex} writes`,
      });
      expect(r.check(`claude_code ${join(bin, 'broken-claude')}`)).toMatchObject({ status: 'fail' });
      expect(r.check(`claude_code ${join(bin, 'broken-claude')}`)?.detail).toMatch(
        /--version failed \(.*: cannot load\), for default\/broken$/,
      );
      expect(r.code).toBe(1);
    } finally {
      await removeAgent('old');
      await removeAgent('broken');
    }
  }, 60_000);

  it('the versions doctor expects are the ones scripts/install-agent-clis.sh installs for the tests', () => {
    const script = readFileSync(new URL('../../scripts/install-agent-clis.sh', import.meta.url), 'utf8');
    expect(/^CODEX_VERSION=(\S+)$/m.exec(script)?.[1]).toBe(VERIFIED_CLI_VERSIONS.codex);
    expect(/^CLAUDE_VERSION=(\S+)$/m.exec(script)?.[1]).toBe(VERIFIED_CLI_VERSIONS.claude_code);
  });

  it('without DATABASE_URL the agents come from the API; a webhook that does not answer is a warning', async () => {
    const closed = await freePort();
    await addAgent('gone-hook', 'webhook', { url: `http://127.0.0.1:${closed}/turns`, secret: 'a-secret-of-sixteen-chars' });
    try {
      const r = await doctorJson(envOf({ DATABASE_URL: '' }));
      expect(r.check('postgres')).toMatchObject({ status: 'warn', detail: 'DATABASE_URL is not set: not checked' });
      expect(r.check('agents')).toMatchObject({
        status: 'ok',
        detail: '5 active that the token may list (API): claude_code 1, codex 1, manual 1, webhook 2',
      });
      expect(r.check('webhook default/gone-hook')).toMatchObject({ status: 'warn' });
      expect(r.check('webhook default/gone-hook')?.detail).toMatch(
        new RegExp(`^cannot reach http://127\\.0\\.0\\.1:${closed}/turns \\(.*ECONNREFUSED.*\\)$`),
      );
      // Warnings alone leave the exit code 0.
      expect(r.body.checks.filter((c) => c.status === 'fail')).toEqual([]);
      expect(r.code).toBe(0);
    } finally {
      await removeAgent('gone-hook');
    }
  }, 60_000);

  it('a worker configuration that delivers none of the providers in use: a warning naming the variable', async () => {
    const r = await doctorJson(envOf({ BATON_WORKER_PROVIDERS: 'demo' }));
    expect(r.check('worker providers')).toMatchObject({
      status: 'warn',
      fix: 'start the worker that serves them with BATON_WORKER_PROVIDERS=demo,claude_code,codex,webhook',
    });
  }, 60_000);

  it('a bad configuration: one fail line naming the variable, nothing else asked', async () => {
    const r = await doctorJson(envOf({ BATON_QUEUE_SHARDS: 'many' }));
    expect(r.code).toBe(1);
    expect(r.body.checks).toEqual([
      {
        name: 'config',
        status: 'fail',
        detail: 'BATON_QUEUE_SHARDS must be a whole number, got "many"',
        fix: 'fix that variable (README.md, "Configuration", lists each with what it takes)',
      },
    ]);
  });
});
