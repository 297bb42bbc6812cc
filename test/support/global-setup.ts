import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { readMigrations } from '../../libs/db/migrate.ts';
import { TEST_PG_ADMIN_URL } from './env.ts';
import { startRedisCluster } from './redis-cluster.ts';
import { ensureAgentClis, ensureChromium } from './test-prerequisites.ts';

/**
 * Names the run's migrated template database (after the migrations' checksum, so it is reused
 * while they do not change) and drops test databases left by earlier runs. It needs no
 * database to exist (test databases of processes still running, a concurrent run's, are left
 * alone): test files that use one build the template on first use
 * (test-database.ts), so the unit tests run without Postgres.
 */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Tests that start `baton` processes run the compiled build (bin/baton.mjs loads dist/): bring it
 * up to date with the sources first, so a stale dist is never what is tested (a no-op when
 * nothing changed).
 */
function buildDist(): void {
  const build = spawnSync(process.execPath, [fileURLToPath(new URL('../../scripts/build.mjs', import.meta.url))], { stdio: 'inherit' });
  if (build.status !== 0) throw new Error('scripts/build.mjs failed: the compiled build the process tests run is not up to date');
}

/**
 * A real Redis Cluster (3 primaries on loopback) for the tests that run on a cluster as well as
 * on a single Redis (redis-targets.ts); `TEST_REDIS_CLUSTER_URL` points them at one of yours.
 * A machine without redis-server fails here, loudly: those tests never skip.
 */
async function startCluster(provide: (key: string, value: unknown) => void): Promise<(() => Promise<void>) | undefined> {
  const given = process.env['TEST_REDIS_CLUSTER_URL'];
  if (given) {
    provide('redisClusterUrl', given);
    return undefined;
  }
  const cluster = await startRedisCluster({ primaries: 3 });
  provide('redisClusterUrl', cluster.url);
  return () => cluster.stop();
}

export default async function setup({
  provide,
}: {
  provide: (key: string, value: unknown) => void;
}): Promise<(() => Promise<void>) | undefined> {
  buildDist();
  // The pinned agent CLIs and Chromium: installed here when missing, so `npm test` passes on a
  // fresh machine after `npm install` alone.
  ensureAgentClis();
  ensureChromium();
  const stopCluster = await startCluster(provide);
  const migrations = await readMigrations();
  const digest = createHash('sha256')
    .update(migrations.map((m) => `${m.name}:${m.checksum}`).join('|'))
    .digest('hex')
    .slice(0, 12);
  const template = `baton_tpl_${digest}`;
  provide('templateDatabase', template);
  const admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL, connectionTimeoutMillis: 2_000 });
  try {
    await admin.connect();
  } catch {
    return stopCluster; // no Postgres: only the tests that need it will fail, and say why
  }
  try {
    const { rows } = await admin.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE (datname LIKE 'baton\\_t\\_%' ESCAPE '\\') OR (datname LIKE 'baton\\_tpl\\_%' ESCAPE '\\' AND datname <> $1)`,
      [template],
    );
    for (const { datname } of rows) {
      // A test database of a process still running belongs to a concurrent run: leave it.
      const pid = /^baton_t_(\d+)_/.exec(datname)?.[1];
      if (pid !== undefined && alive(Number(pid))) continue;
      await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    }
  } finally {
    await admin.end();
  }
  return stopCluster;
}

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabase: string;
    redisClusterUrl: string;
  }
}
