import type { BenchEnvironment, ProcessTuning } from '../bench-environment.ts';
import type { LoadResult } from '../http-load.ts';
import { connectionsTo, peakRssMiB, round } from '../measure.ts';
import { BENCH_SQL, redisMemoryOfWaitingJobs, statementProfile, usagePerHandoff, usageSnapshot, type UsagePerHandoff } from '../usage.ts';
import { deliveryMetrics, registerAgents, sendMany, waitSettled, type DeliveryMetrics } from './common.ts';

export interface ProcessCost {
  apiRssMiB: number | null;
  workerRssMiB: Array<number | null>;
  demoHostRssMiB: number | null;
  redisConnectionsPerWorker: number[];
  redisConnectionsApi: number;
  postgresConnections: Record<string, number>;
  /**
   * Redis memory per handoff still waiting for delivery when the last send was accepted (the
   * backlog's peak): what the waiting jobs hold (redisMemoryOfWaitingJobs) over that backlog.
   * null: no backlog.
   */
  redisBytesPerQueuedHandoff: number | null;
  /** Handoffs not yet delivered at that moment. */
  queuedAtPeak: number;
}

export interface DeliveryRun extends DeliveryMetrics {
  agents: number;
  send: LoadResult;
  cost: ProcessCost;
  /** CPU, statements and commands per handoff, from the first measured send to the last RETURNED. */
  perHandoff: UsagePerHandoff;
  /**
   * The warm-up before it, in the same fresh processes: `handoffs` sent and delivered the same
   * way, and what each cost (a process's first handoffs also pay for its JIT compiling the hot
   * path). null: no warm-up.
   */
  warmUp: { handoffs: number; perHandoff: UsagePerHandoff } | null;
}

/** Options of a delivery run beyond the standard e2e one (the capacity runs). */
export interface DeliveryOptions {
  /** The project, and the prefix of its agents' handles (default `e2e-<agents>`, `e<agents>`). */
  project?: string;
  /** The processes' settings for this run (`workers`: how many worker processes). */
  tuning?: Partial<ProcessTuning>;
  /** Runs once every handoff is RETURNED, before the processes stop and Redis is cleared. */
  beforeRelease?: () => Promise<void>;
}

/**
 * End to end with API and two workers as separate processes and zero-think demo agents: send
 * `handoffs` over HTTP (32 clients) round-robin to `agents` agents, wait until every one is
 * RETURNED, then read throughput and latencies from Postgres and the cost from /proc and
 * pg_stat_activity. Fresh processes per run, so peaks belong to this agent count. First
 * `warmUp` handoffs go the same way and are measured apart: the figures of the run are those of
 * processes that run steadily, as a fleet's do, and the warm-up's cost is reported beside them.
 */
export async function measureDelivery(
  env: BenchEnvironment,
  agents: number,
  handoffs: number,
  fresh: boolean,
  warmUp: number,
  tick: (label: string) => void,
  opts: DeliveryOptions = {},
): Promise<DeliveryRun> {
  const project = opts.project ?? `e2e-${agents}`;
  const handlePrefix = opts.project ?? `e${agents}`;
  await env.createProject(project);
  await env.resetDemoHost();
  const client = await env.processes(fresh, opts.tuning);
  const handles = Array.from({ length: agents }, (_, i) => `${handlePrefix}-${i}`);
  await registerAgents(client, project, [`${handlePrefix}-sender`, ...handles], { thinkMs: 0 });
  tick(`e2e ${agents} agents: agents registered`);
  const body = (tag: string) => (i: number) => ({
    from: `${handlePrefix}-sender`,
    to: handles[i % agents],
    title: `${tag} ${i}`,
    message: `End-to-end handoff ${i}`,
  });
  let warm: DeliveryRun['warmUp'] = null;
  if (warmUp > 0) {
    const before = await usageSnapshot(env);
    await sendMany(client, project, warmUp, 32, body('warm-up'));
    await waitSettled(env.pool, project, warmUp, 300_000);
    warm = { handoffs: warmUp, perHandoff: usagePerHandoff(before, await usageSnapshot(env), warmUp) };
    tick(`e2e ${agents} agents: warmed up`);
  }
  const afterSeq = await lastSeq(env, project);
  const profiled = await statementProfile(env);
  const before = await usageSnapshot(env);
  const send = await sendMany(client, project, handoffs, 32, body('task'));
  const memoryAtPeak = await redisMemoryOfWaitingJobs(env);
  const queuedAtPeak = await openHandoffs(env, project);
  await waitSettled(env.pool, project, warmUp + handoffs, 300_000);
  const perHandoff = usagePerHandoff(before, await usageSnapshot(env), handoffs);
  await profiled(opts.project ?? `e2e-${agents}-agents`, handoffs);
  const cost: ProcessCost = {
    ...(await processCost(env)),
    redisBytesPerQueuedHandoff: queuedAtPeak > 0 ? round(memoryAtPeak / queuedAtPeak, 0) : null,
    queuedAtPeak,
  };
  const metrics = await deliveryMetrics(env.pool, project, afterSeq);
  await opts.beforeRelease?.();
  await env.releaseProcesses(fresh);
  if (fresh) await env.clearRedis();
  tick(`e2e ${agents} agents: done`);
  return { agents, send, cost, perHandoff, warmUp: warm, ...metrics };
}

/** The project's highest handoff seq (0: none): handoffs sent later have a higher one. */
async function lastSeq(env: BenchEnvironment, project: string): Promise<string> {
  const { rows } = await env.pool.query<{ seq: string }>(
    `${BENCH_SQL} SELECT coalesce(max(seq), 0)::text AS seq FROM handoffs WHERE project_id = (SELECT id FROM projects WHERE slug = $1)`,
    [project],
  );
  return rows[0]?.seq ?? '0';
}

async function openHandoffs(env: BenchEnvironment, project: string): Promise<number> {
  const { rows } = await env.pool.query<{ n: number }>(
    `${BENCH_SQL} SELECT count(*)::int AS n FROM handoffs WHERE project_id = (SELECT id FROM projects WHERE slug = $1) AND settled_at IS NULL`,
    [project],
  );
  return rows[0]?.n ?? 0;
}

export async function processCost(env: BenchEnvironment): Promise<Omit<ProcessCost, 'redisBytesPerQueuedHandoff' | 'queuedAtPeak'>> {
  const { rows } = await env.pool.query<{ app: string; n: number }>(
    `SELECT application_name AS app, count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'baton-%' AND application_name <> 'baton-bench' GROUP BY 1`,
  );
  const label = (app: string) =>
    env.api && app.endsWith(`-${env.api.pid}`)
      ? 'api'
      : env.workers.some((w) => app.endsWith(`-${w.pid}`))
        ? `worker-${env.workers.findIndex((w) => app.endsWith(`-${w.pid}`)) + 1}`
        : app;
  return {
    apiRssMiB: env.api ? await peakRssMiB(env.api.pid) : null,
    workerRssMiB: await Promise.all(env.workers.map((w) => peakRssMiB(w.pid))),
    demoHostRssMiB: await peakRssMiB(env.demoHostPid),
    redisConnectionsPerWorker: await Promise.all(env.workers.map((w) => connectionsTo(w.pid, env.redisPort))),
    redisConnectionsApi: env.api ? await connectionsTo(env.api.pid, env.redisPort) : 0,
    postgresConnections: Object.fromEntries(rows.map((r) => [label(r.app), r.n])),
  };
}
