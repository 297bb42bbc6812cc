import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { BenchEnvironment } from './bench-environment.ts';
import { cpuOf, procStat, round, TICK_MS } from './measure.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';

/** Marks the bench's own queries, so statement counts leave them out (the text is kept by pg_stat_statements). */
export const BENCH_SQL = '/* baton-bench */';

/**
 * CPU time of a server and everything it forked, ms: its own, its live children's, and the
 * reaped children's (so a Postgres backend that exits inside the window is still counted).
 */
async function treeCpuOf(pid: number | null): Promise<number | null> {
  if (!pid || pid < 0) return null;
  const root = await procStat(pid);
  if (!root) return null;
  let total = root.ownMs + root.reapedMs;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const child = await procStat(Number(entry));
    if (child?.ppid === pid) total += child.ownMs;
  }
  return total;
}

/** Who spent the CPU: one key per process role. null: not measurable here (a shared server). */
export interface CpuByRole {
  api: number | null;
  workers: number | null;
  demoHost: number | null;
  postgres: number | null;
  redis: number | null;
  /** The benchmark itself: the 32 HTTP clients generating the load and its polling (with the Postgres backends its polling uses). */
  loadGenerator: number | null;
}

export interface UsageSnapshot {
  cpuMs: CpuByRole;
  postgresStatements: number | null;
  redisCommands: number | null;
  /** When it was taken (performance.now()), ms. */
  atMs: number;
  /** The position in Postgres's WAL, bytes (null: a configured server, where others write WAL too). */
  postgresWalBytes: number | null;
  /** CPU time the whole host spent, every core, every process (/proc/stat), ms; null where unreadable. */
  hostCpuMs: number | null;
}

/** What one handoff cost over a measured window, all processes of the run included. */
export interface UsagePerHandoff {
  /** CPU ms per handoff by role, and their total. */
  cpuMs: CpuByRole & { total: number };
  /** Statements Baton sent to Postgres per handoff (null: pg_stat_statements is not loaded). */
  postgresStatements: number | null;
  /** Commands Redis processed per handoff (null: a shared Redis, where others' commands count too). */
  redisCommands: number | null;
  /** WAL bytes Postgres wrote per handoff (pg_current_wal_lsn before and after; null: a configured server). */
  postgresWalBytes?: number | null;
  /** How long the window lasted, s. */
  windowSeconds?: number;
  /**
   * CPU the host spent in the window outside the processes measured (other users of a shared
   * machine), per handoff, ms: the host's total (/proc/stat) minus the run's. null: unreadable.
   */
  otherProcessesCpuMs?: number | null;
}

/** Busy CPU time of the whole host (every core; /proc/stat's first line without idle and iowait), ms. */
async function hostCpuMs(): Promise<number | null> {
  try {
    const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0] ?? '';
    // cpu user nice system idle iowait irq softirq steal (guest time is inside user)
    const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
    if (f.length < 8 || f.some((v) => !Number.isFinite(v))) return null;
    const [user, nice, system, , , irq, softirq, steal] = f as [number, number, number, number, number, number, number, number];
    return (user + nice + system + irq + softirq + steal) * TICK_MS;
  } catch {
    return null;
  }
}

/** Redis's used_memory, bytes. */
export async function redisUsedMemory(env: BenchEnvironment): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await env.redis.info('memory'))?.[1] ?? 0);
}

const memoryOf = async (env: BenchEnvironment, key: string) => Number((await env.redis.memory('USAGE', key).catch(() => 0)) ?? 0);

/**
 * Redis memory held by the delivery jobs not finished right now, bytes: each queue's wait and
 * active lists and delayed set, plus the hashes of the jobs in them (all of them up to 500 per queue, else a
 * sample of 500 scaled up). MEMORY USAGE per key, so nothing else on the server counts.
 */
export async function redisMemoryOfWaitingJobs(env: BenchEnvironment): Promise<number> {
  let total = 0;
  // Empty lists do not exist in Redis; every queue has its job-id counter.
  for (const idKey of await env.scanKeys(`${new RedisNames(env.prefix).bullPrefix}:*:id`)) {
    const base = idKey.slice(0, -':id'.length);
    const waitKey = `${base}:wait`;
    const ids = [
      ...(await env.redis.lrange(waitKey, 0, -1)),
      ...(await env.redis.lrange(`${base}:active`, 0, -1)),
      ...(await env.redis.zrange(`${base}:delayed`, '0', '-1')),
    ];
    total += (await memoryOf(env, waitKey)) + (await memoryOf(env, `${base}:active`)) + (await memoryOf(env, `${base}:delayed`));
    const sample = ids.length <= 500 ? ids : Array.from({ length: 500 }, (_, i) => ids[Math.floor((i * ids.length) / 500)]!);
    const sizes = await Promise.all(sample.map((id) => memoryOf(env, `${base}:${id}`)));
    if (sample.length > 0) total += (sizes.reduce((a, b) => a + b, 0) / sample.length) * ids.length;
  }
  return Math.round(total);
}

/**
 * CPU of the Postgres backends serving the bench's own connections (its polling and read-backs),
 * ms: the load generator's share of the server's CPU, not Baton's. The bench's pool keeps its
 * connections open, so these backends live through a measured window.
 */
async function benchBackendsCpu(env: BenchEnvironment): Promise<number> {
  const { rows } = await env.pool.query<{ pid: number }>(
    `${BENCH_SQL} SELECT pid FROM pg_stat_activity WHERE application_name = 'baton-bench'`,
  );
  const cpu = await Promise.all(rows.map((r) => cpuOf(r.pid)));
  return cpu.reduce<number>((a, b) => a + (b ?? 0), 0);
}

export async function usageSnapshot(env: BenchEnvironment): Promise<UsageSnapshot> {
  const workers = await Promise.all(env.workers.map((w) => cpuOf(w.pid)));
  const [api, demoHost, postgresTree, redis, benchProcess, benchBackends] = await Promise.all([
    cpuOf(env.api?.pid),
    cpuOf(env.demoHostPid),
    treeCpuOf(env.serverPids.postgres),
    treeCpuOf(env.serverPids.redis),
    cpuOf(process.pid),
    benchBackendsCpu(env),
  ]);
  // Only a server of the bench's own (embedded) is measured; its backends for the bench's
  // connections count with the load generator.
  const postgres = postgresTree === null ? null : postgresTree - benchBackends;
  const loadGenerator = benchProcess === null ? null : benchProcess + (postgresTree === null ? 0 : benchBackends);
  let postgresStatements: number | null = null;
  if (env.statementStats) {
    const { rows } = await env.pool.query<{ n: string | null }>(
      `${BENCH_SQL} SELECT sum(calls) AS n FROM pg_stat_statements
       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '${BENCH_SQL}%'`,
    );
    postgresStatements = Number(rows[0]?.n ?? 0);
  }
  let redisCommands: number | null = null;
  if (env.embedded.redis) redisCommands = Number(/total_commands_processed:(\d+)/.exec(await env.redis.info('stats'))?.[1] ?? NaN);
  let postgresWalBytes: number | null = null;
  if (env.embedded.postgres) {
    const { rows } = await env.pool.query<{ b: string }>(`${BENCH_SQL} SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS b`);
    postgresWalBytes = Number(rows[0]?.b ?? NaN);
  }
  return {
    atMs: performance.now(),
    postgresWalBytes,
    hostCpuMs: await hostCpuMs(),
    cpuMs: {
      api,
      workers: workers.some((w) => w === null) ? null : workers.reduce<number>((a, b) => a + (b ?? 0), 0),
      demoHost,
      postgres,
      redis,
      loadGenerator,
    },
    postgresStatements,
    redisCommands,
  };
}

const perHandoff = (a: number | null, b: number | null, handoffs: number, digits: number) =>
  a === null || b === null ? null : round(Math.max(0, b - a) / handoffs, digits);

/** The host's CPU in the window minus every measured process's (at least 0), per handoff; null when a part is unknown. */
function otherProcesses(before: UsageSnapshot, after: UsageSnapshot, handoffs: number): number | null {
  if (before.hostCpuMs === null || after.hostCpuMs === null) return null;
  const roles = Object.keys(before.cpuMs) as Array<keyof CpuByRole>;
  let measured = 0;
  for (const role of roles) {
    const a = before.cpuMs[role];
    const b = after.cpuMs[role];
    // A server the bench does not run (configured Postgres or Redis) may run elsewhere: unknown.
    if (a === null || b === null) return null;
    measured += b - a;
  }
  return round(Math.max(0, after.hostCpuMs - before.hostCpuMs - measured) / handoffs, 3);
}

export function usagePerHandoff(before: UsageSnapshot, after: UsageSnapshot, handoffs: number): UsagePerHandoff {
  const roles = Object.keys(before.cpuMs) as Array<keyof CpuByRole>;
  const cpu = Object.fromEntries(
    roles.map((role) => [role, perHandoff(before.cpuMs[role], after.cpuMs[role], handoffs, 3)]),
  ) as unknown as CpuByRole;
  return {
    cpuMs: {
      ...cpu,
      total: round(
        roles.reduce((sum, role) => sum + (cpu[role] ?? 0), 0),
        2,
      ),
    },
    postgresStatements: perHandoff(before.postgresStatements, after.postgresStatements, handoffs, 2),
    // The after snapshot's own INFO is not counted yet; the before one is.
    redisCommands: perHandoff(before.redisCommands === null ? null : before.redisCommands + 1, after.redisCommands, handoffs, 2),
    postgresWalBytes: perHandoff(before.postgresWalBytes, after.postgresWalBytes, handoffs, 0),
    windowSeconds: round((after.atMs - before.atMs) / 1000, 3),
    otherProcessesCpuMs: otherProcesses(before, after, handoffs),
  };
}

/** Calls per Redis command (INFO commandstats), the bench's own INFO calls left out. */
export async function commandStats(env: BenchEnvironment): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of (await env.redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== 'info') out.set(m[1]!, Number(m[2]));
  }
  return out;
}

/**
 * BATON_BENCH_STATEMENTS_DIR=DIR (profiling, like BATON_CPU_PROF_DIR): `statementProfile(env)`
 * before a phase resets pg_stat_statements; the function it returns writes, after the phase,
 * DIR/<label>.txt with the Redis commands per handoff (INFO commandstats) and every statement
 * Baton ran in it, by total execution time: calls, mean execution and planning ms, rows per
 * call, and per handoff the calls and ms. Does nothing when the variable is unset or
 * pg_stat_statements is not loaded.
 */
export async function statementProfile(env: BenchEnvironment): Promise<(label: string, handoffs: number) => Promise<void>> {
  const dir = process.env['BATON_BENCH_STATEMENTS_DIR'];
  if (!dir || !env.statementStats) return async () => undefined;
  await env.pool.query(`${BENCH_SQL} SELECT pg_stat_statements_reset()`);
  const commandsBefore = await commandStats(env);
  return async (label, handoffs) => {
    const commandsAfter = await commandStats(env);
    const { rows } = await env.pool.query<{ calls: string; exec: number; plan: number; rows: string; query: string }>(
      `${BENCH_SQL} SELECT calls, total_exec_time AS exec, total_plan_time AS plan, rows, regexp_replace(query, '\\s+', ' ', 'g') AS query
       FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '${BENCH_SQL}%' AND query NOT LIKE '%pg_stat_statements%'
       ORDER BY total_exec_time + total_plan_time DESC`,
    );
    const n = Math.max(1, handoffs);
    const lines = rows.map((r) => {
      const calls = Number(r.calls);
      const fields = [
        `calls/handoff ${round(calls / n, 3)}`,
        `ms/handoff ${round((r.exec + r.plan) / n, 3)}`,
        `mean exec ${round(r.exec / calls, 3)} ms`,
        `mean plan ${round(r.plan / calls, 3)} ms`,
        `rows/call ${round(Number(r.rows) / calls, 2)}`,
      ];
      return `${fields.join(', ')}\n  ${r.query.slice(0, 600)}\n`;
    });
    const commands = [...commandsAfter]
      .map(([name, calls]) => [name, calls - (commandsBefore.get(name) ?? 0)] as const)
      .filter(([, calls]) => calls > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([name, calls]) => `${name} ${round(calls / n, 3)}`);
    await mkdir(dir, { recursive: true });
    await writeFile(
      path.join(dir, `${label}.txt`),
      `${label}: ${handoffs} handoffs\n\nRedis commands per handoff: ${commands.join(', ')}\n\n${lines.join('\n')}`,
    );
  };
}
