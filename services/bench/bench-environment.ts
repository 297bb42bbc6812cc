import { parseRedisTarget } from '../../libs/config/redis-target.ts';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { BatonConfig } from '../../libs/config/load-config.ts';
import { migrate } from '../../libs/db/migrate.ts';
import { freePort, startEmbeddedPostgres, startPrivateRedis } from '../../libs/processes/embedded-infra.ts';
import { spawnBaton, type BatonProcess } from '../../libs/processes/spawn-baton.ts';
import { JsonClient } from './http-load.ts';
import { cpuOf } from './measure.ts';

export interface ProcessTuning {
  /** Worker processes a scenario runs (`--workers` sets it for the capacity runs). */
  workers: number;
  workerConcurrency: number;
  queueShards: number;
  dbPoolSize: number;
  /** BATON_JOB_LOCK_MS; absent: Baton's default. */
  jobLockMs?: number;
}

export const DEFAULT_TUNING: ProcessTuning = { workers: 2, workerConcurrency: 64, queueShards: 4, dbPoolSize: 10 };

/**
 * Everything a benchmark run needs, on the same embedded-or-configured Postgres and Redis as
 * the demo: a fresh database (its own, dropped at the end), a Redis key prefix, and Baton as
 * real separate processes (API, workers, a shared demo-session host).
 */
export class BenchEnvironment {
  readonly prefix = `bench${randomBytes(3).toString('hex')}`;
  /** BATON_HOME of the bench's processes: the API's first start writes the admin token here. */
  readonly home = mkdtempSync(join(tmpdir(), 'baton-bench-'));
  readonly pool: pg.Pool;
  readonly redis: Redis;
  demoHostUrl = '';
  apiUrl = '';
  api: BatonProcess | undefined;
  workers: BatonProcess[] = [];
  /** pg_stat_statements works on this server (the embedded one loads it): statements are counted. */
  statementStats = false;
  private demoHost: BatonProcess | undefined;
  /** What the running (or next started) API and workers are configured with. */
  private running: ProcessTuning;
  private readonly cleanups: Array<() => Promise<void>> = [];

  private constructor(
    readonly databaseUrl: string,
    readonly redisUrl: string,
    readonly embedded: { postgres: boolean; redis: boolean },
    /** Process ids of the embedded Postgres (postmaster) and private Redis, for CPU accounting. */
    readonly serverPids: { postgres: number | null; redis: number | null },
    private readonly tuning: ProcessTuning,
    cleanups: Array<() => Promise<void>>,
  ) {
    this.cleanups.push(...cleanups);
    this.running = tuning;
    // Connections stay open (no idle timeout): usage.ts counts their backends' CPU as the bench's own.
    this.pool = new pg.Pool({ connectionString: databaseUrl, max: 10, application_name: 'baton-bench', idleTimeoutMillis: 0 });
    this.pool.on('error', () => undefined);
    this.redis = new Redis(redisUrl, { maxRetriesPerRequest: null, connectionName: 'baton-bench' });
    this.redis.on('error', () => undefined);
  }

  static async start(config: BatonConfig, tuning: ProcessTuning, log: (s: string) => void): Promise<BenchEnvironment> {
    const cleanups: Array<() => Promise<void>> = [];
    let databaseUrl: string;
    let embeddedPg = false;
    const serverPids: { postgres: number | null; redis: number | null } = { postgres: null, redis: null };
    if (config.databaseUrl) {
      // A database of its own on the configured server, dropped at the end.
      const name = `baton_bench_${randomBytes(3).toString('hex')}`;
      const admin = new URL(config.databaseUrl);
      admin.pathname = '/postgres';
      const c = new pg.Client({ connectionString: admin.toString() });
      await c.connect();
      await c.query(`CREATE DATABASE ${name}`);
      await c.end();
      const url = new URL(config.databaseUrl);
      url.pathname = `/${name}`;
      databaseUrl = url.toString();
      cleanups.unshift(async () => {
        const d = new pg.Client({ connectionString: admin.toString() });
        await d.connect();
        await d.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await d.end();
      });
    } else {
      log('starting an embedded Postgres (no DATABASE_URL)');
      const started = await startEmbeddedPostgres({ statementStats: true });
      cleanups.unshift(started.stop);
      databaseUrl = started.url;
      embeddedPg = true;
      serverPids.postgres = started.pid;
    }
    let redisUrl: string;
    let embeddedRedis = false;
    if (config.redisUrl) {
      // The bench reads one server's INFO and memory and counts its commands: a cluster's
      // figures would be one node's. Point it at one server (or none: it starts its own).
      if (parseRedisTarget(config.redisUrl).kind === 'cluster')
        throw new Error(
          'the bench measures one Redis server: unset REDIS_URL (it starts a private one) or give a redis:// URL, not redis+cluster://',
        );
      redisUrl = config.redisUrl;
    } else {
      log('starting a private redis-server (no REDIS_URL)');
      const started = await startPrivateRedis();
      cleanups.unshift(started.stop);
      redisUrl = started.url;
      embeddedRedis = true;
      serverPids.redis = started.pid;
    }
    await migrate(databaseUrl);
    const env = new BenchEnvironment(databaseUrl, redisUrl, { postgres: embeddedPg, redis: embeddedRedis }, serverPids, tuning, cleanups);
    // In the bench's own database; usable only where the server preloads it (the embedded one does).
    env.statementStats = await env.pool
      .query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
      .then(() => env.pool.query('SELECT 1 FROM pg_stat_statements LIMIT 1'))
      .then(
        () => true,
        () => false,
      );
    await env.startDemoHost();
    return env;
  }

  get redisPort(): number {
    return Number(new URL(this.redisUrl).port || 6379);
  }

  get postgresPort(): number {
    return Number(new URL(this.databaseUrl).port || 5432);
  }

  private processEnv(extra: Record<string, string> = {}): Record<string, string> {
    return {
      DATABASE_URL: this.databaseUrl,
      REDIS_URL: this.redisUrl,
      BATON_REDIS_PREFIX: this.prefix,
      BATON_LOG_LEVEL: 'warn',
      BATON_QUEUE_SHARDS: String(this.running.queueShards),
      BATON_WORKER_CONCURRENCY: String(this.running.workerConcurrency),
      BATON_DB_POOL_SIZE: String(this.running.dbPoolSize),
      ...(this.running.jobLockMs === undefined ? {} : { BATON_JOB_LOCK_MS: String(this.running.jobLockMs) }),
      BATON_DEMO_HOST_URL: this.demoHostUrl,
      BATON_HOME: this.home,
      // The bench drives every request through one admin token, far past any per-token limit.
      BATON_RATE_LIMIT_PER_SEC: '0',
      ...extra,
    };
  }

  private async startDemoHost(): Promise<void> {
    const port = await freePort();
    this.demoHost = spawnBaton(['demo-host', '--port', String(port)], this.processEnv());
    await this.demoHost.waitFor(/demo sessions on/, 30_000);
    this.demoHostUrl = `http://127.0.0.1:${port}`;
  }

  get demoHostPid(): number {
    return this.demoHost?.pid ?? -1;
  }

  /** Demo-session statistics from the shared host (writes per handoff, overlaps). */
  async demoStats(): Promise<{
    sessions: Array<{ session: string; turnsReceived: number; overlapAttempts: number; repeatedRequestIds: number }>;
    writesByHandoff: Record<string, string[]>;
  }> {
    const res = await fetch(`${this.demoHostUrl}/stats`);
    return (await res.json()) as never;
  }

  async demoHistory(session: string): Promise<Array<{ handoffId: string; receivedAt: number; finishedAt: number | null }>> {
    const res = await fetch(`${this.demoHostUrl}/sessions/${encodeURIComponent(session)}/history`);
    return (await res.json()) as never;
  }

  /** Empties the demo sessions so each scenario starts clean. */
  async resetDemoHost(): Promise<void> {
    await fetch(`${this.demoHostUrl}/reset`, { method: 'POST' });
  }

  async startApi(): Promise<JsonClient> {
    const port = await freePort();
    this.api = spawnBaton(['api'], this.processEnv({ BATON_API_PORT: String(port) }));
    await this.api.waitFor(/Baton API on/, 30_000);
    this.apiUrl = `http://127.0.0.1:${port}`;
    const token = readFileSync(join(this.home, 'admin.token'), 'utf8').trim();
    return new JsonClient(this.apiUrl, 64, { authorization: `Bearer ${token}` });
  }

  async startWorkers(n: number): Promise<void> {
    const started = Array.from({ length: n }, () => spawnBaton(['worker'], this.processEnv({ BATON_LOG_LEVEL: 'info' })));
    await Promise.all(started.map((w) => w.waitFor(/delivery worker started/, 30_000)));
    this.workers.push(...started);
  }

  /**
   * Starts one API or worker process on its own, times it from spawn to its ready line (the one
   * startApi / startWorkers wait for), reads the CPU it spent until then, and stops it.
   */
  async timeStart(role: 'api' | 'worker'): Promise<{ readyMs: number; cpuMs: number | null }> {
    const extra: Record<string, string> = role === 'api' ? { BATON_API_PORT: String(await freePort()) } : { BATON_LOG_LEVEL: 'info' };
    const started = performance.now();
    const p = spawnBaton([role], this.processEnv(extra));
    try {
      await p.waitFor(role === 'api' ? /Baton API on/ : /delivery worker started/, 30_000);
      const readyMs = performance.now() - started;
      return { readyMs, cpuMs: await cpuOf(p.pid) };
    } finally {
      await p.stop('SIGTERM');
    }
  }

  private client: JsonClient | undefined;

  /** The tuning the running (or next started) processes have: the bench's, or a scenario's override. */
  get tuningInUse(): ProcessTuning {
    return this.running;
  }

  /**
   * The API and the workers (two, or `tuning.workers`) for a scenario. `fresh` restarts them, so peaks (RSS) and
   * connection counts belong to this scenario alone (the full run); otherwise running ones are
   * reused (the quick run, where process start-up would dominate). `tuning` overrides the
   * bench's settings for this scenario through the same environment variables an operator
   * sets; processes running with other settings are restarted.
   */
  async processes(fresh: boolean, tuning: Partial<ProcessTuning> = {}): Promise<JsonClient> {
    const wanted: ProcessTuning = { ...this.tuning, ...tuning };
    const retune = JSON.stringify(wanted) !== JSON.stringify(this.running);
    if (fresh || retune) await this.releaseProcesses(true);
    this.running = wanted;
    const missing = Math.max(0, this.running.workers - this.workers.length);
    if (!this.api || !this.client) {
      const [client] = await Promise.all([this.startApi(), this.startWorkers(missing)]);
      this.client = client;
    } else if (missing > 0) {
      await this.startWorkers(missing);
    }
    return this.client;
  }

  /** Ends a scenario: stops the processes when they were started fresh for it. */
  async releaseProcesses(fresh: boolean): Promise<void> {
    if (!fresh) return;
    await this.stopWorkers();
    await this.stopApi();
    this.client?.close();
    this.client = undefined;
  }

  async stopWorkers(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop(signal)));
    this.workers = [];
  }

  async stopApi(): Promise<void> {
    await this.api?.stop('SIGTERM');
    this.api = undefined;
  }

  /** A project in the default workspace (bench set-up, straight into the bench's own database). */
  async createProject(slug: string): Promise<void> {
    await this.pool.query(
      `INSERT INTO projects (id, workspace_id, slug, name)
       SELECT gen_random_uuid(), id, $1, $1 FROM workspaces WHERE slug = 'default' ON CONFLICT DO NOTHING`,
      [slug],
    );
  }

  /** Every key matching `pattern` (SCAN, so Redis is never blocked). */
  async scanKeys(pattern: string): Promise<string[]> {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      found.push(...keys);
      cursor = next;
    } while (cursor !== '0');
    return found;
  }

  /** Deletes every queue and lock key of this run (between scenarios). */
  async clearRedis(): Promise<void> {
    const keys = await this.scanKeys(`${this.prefix}:*`);
    for (let i = 0; i < keys.length; i += 1000) await this.redis.del(...keys.slice(i, i + 1000));
  }

  async close(): Promise<void> {
    this.client?.close();
    // Teardown is best effort: each step runs whatever the one before did.
    await this.stopWorkers('SIGKILL').catch(() => undefined);
    await this.stopApi().catch(() => undefined);
    await this.demoHost?.stop('SIGKILL').catch(() => undefined);
    if (!this.embedded.redis) await this.clearRedis().catch(() => undefined);
    this.redis.disconnect();
    // Best effort, as above.
    await this.pool.end().catch(() => undefined);
    for (const c of this.cleanups) await c().catch(() => undefined);
    rmSync(this.home, { recursive: true, force: true });
  }
}
