import { findWriteViolations, type DemoWrite } from '../../../libs/adapters/demo/demo-agent-host.ts';
import { RedisNames } from '../../../libs/queue/redis-names.ts';
import type { BenchEnvironment } from '../bench-environment.ts';
import { round, rssMiB } from '../measure.ts';
import { BENCH_SQL, commandStats, usagePerHandoff, usageSnapshot } from '../usage.ts';
import { registerAgents, sendMany, waitSettled } from './common.ts';

export interface LongTurnsOptions {
  /** Agents, each sent one handoff whose turn lasts `turnMs`. */
  turns: number;
  turnMs: number;
  /** The window in which only waiting happens, measured while every started turn is live. */
  quietMs: number;
  /** BATON_WORKER_CONCURRENCY for this scenario's workers (default: the bench's). */
  workerConcurrency?: number;
  /** BATON_JOB_LOCK_MS for this scenario's workers (default: Baton's). */
  jobLockMs?: number;
}

/** One Redis command or Postgres statement, per second per live turn, in the quiet window. */
export interface RateLine {
  name: string;
  perSecPerTurn: number;
}

export interface LongTurnsResult {
  turns: number;
  turnSeconds: number;
  workers: number;
  workerConcurrency: number;
  queueShards: number;
  /** BullMQ job slots over the workers: workers x providers x pools x shards x concurrency. */
  slots: number;
  /** Most handoffs in ACCEPTED or RUNNING at once (sampled every 250 ms). */
  peakInFlight: number;
  /** Turns each worker process wrote and followed (attempts by worker id). */
  turnsPerWorker: number[];
  /** From the last handoff recorded to the last one RETURNED (Postgres timestamps). */
  lastSendToAllReturnedSec: number;
  /** From the first handoff recorded to the last turn ACCEPTED. */
  firstSendToLastAcceptedSec: number;
  returned: number;
  /** Live turns during the quiet window (its denominator). */
  liveInWindow: number;
  quietSeconds: number;
  /** No handoff changed state during the window: nothing but waiting happened. */
  quietWindowClean: boolean;
  /** BullMQ active jobs over live turns at the start of the window. */
  activeJobsPerLiveTurn: number | null;
  /** Delivery jobs waiting or delayed at the start of the window (re-queued follow-ups). */
  queuedJobsInWindow: number;
  /** Warnings and errors the workers logged during the scenario, by message. */
  workerWarnings: Record<string, number>;
  /** Worker RSS before the turns (after a warm-up) and during the window, MiB per worker. */
  workerRssIdleMiB: Array<number | null>;
  workerRssLiveMiB: Array<number | null>;
  /** (RSS with the turns live - idle RSS) over live turns, all workers together. null: not measurable. */
  workerRssKiBPerTurn: number | null;
  /** Commands Redis processed per second per live turn in the window (null: a shared Redis). */
  redisCommandsPerSecPerTurn: number | null;
  redisTopCommands: RateLine[] | null;
  /** Statements Baton ran per second per live turn in the window (null: no pg_stat_statements). */
  postgresStatementsPerSecPerTurn: number | null;
  postgresTopStatements: RateLine[] | null;
  /** CPU ms per second per live turn in the window: the workers, and every process measured. */
  cpuMsPerSecPerTurn: { workers: number | null; total: number };
  /** Long-turn handoffs not written to their session exactly once (must be 0). */
  handoffsNotWrittenOnce: number;
  /** findWriteViolations over the long-turn sessions: overlaps and repeated request ids (must be 0). */
  writeViolations: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Many agents each in one long turn at the same time: how many turns the bench's two workers
 * follow at once, what following them costs while nothing but waiting happens (Redis commands,
 * Postgres statements, CPU and memory per live turn, BullMQ slots), how long after the last
 * send every turn is RETURNED, and the proof that each handoff was written exactly once.
 */
export async function measureLongTurns(
  env: BenchEnvironment,
  opts: LongTurnsOptions,
  fresh: boolean,
  tick: (label: string) => void,
): Promise<LongTurnsResult> {
  const project = 'long';
  await env.createProject(project);
  await env.createProject('long-warmup');
  await env.resetDemoHost();
  const tuned = {
    ...(opts.workerConcurrency === undefined ? {} : { workerConcurrency: opts.workerConcurrency }),
    ...(opts.jobLockMs === undefined ? {} : { jobLockMs: opts.jobLockMs }),
  };
  const client = await env.processes(fresh, tuned);
  const tuning = env.tuningInUse;
  const workers = env.workers.length;
  // Reused workers (the quick run) have logged earlier scenarios: count from here on.
  const logStart = env.workers.map((w) => w.output().length);
  const handles = Array.from({ length: opts.turns }, (_, i) => `long-${i}`);
  await registerAgents(client, project, ['long-sender', ...handles], { thinkMs: opts.turnMs });

  // Warm the workers up (JIT, pools, sockets) so the idle RSS is a running worker's, not a cold one's.
  const warm = Array.from({ length: Math.min(100, opts.turns) }, (_, i) => `long-warm-${i}`);
  await registerAgents(client, 'long-warmup', ['long-warm-sender', ...warm], { thinkMs: 0 });
  await sendMany(client, 'long-warmup', warm.length * 2, 32, (i) => ({
    from: 'long-warm-sender',
    to: warm[i % warm.length],
    title: `warm-up ${i}`,
    message: 'warm-up',
  }));
  await waitSettled(env.pool, 'long-warmup', warm.length * 2, 120_000);
  const workerRssIdleMiB = await Promise.all(env.workers.map((w) => rssMiB(w.pid)));
  tick('long turns: agents registered');

  const projectId = await idOf(env, project);
  const sent = await sendMany(client, project, opts.turns, 32, (i) => ({
    from: 'long-sender',
    to: handles[i],
    title: `long turn ${i}`,
    message: `A turn that lasts ${opts.turnMs} ms`,
  }));
  if (sent.errors > 0) throw new Error(`sending the long turns failed: ${JSON.stringify(sent.statuses)}`);
  const sentAt = performance.now();

  let peakInFlight = 0;
  const sample = async () => {
    const c = await stateCounts(env, projectId);
    peakInFlight = Math.max(peakInFlight, c.live);
    return c;
  };

  // The quiet window opens once the live turns stop changing (all started, or every slot
  // full) and all of them are RUNNING, or at the latest halfway through the first turns.
  let previous = await sample();
  let stableSince = performance.now();
  for (;;) {
    await sleep(250);
    const now = await sample();
    if (now.key !== previous.key) stableSince = performance.now();
    previous = now;
    const settledDown =
      now.live > 0 && now.accepted === 0 && now.sending === 0 && now.ended === 0 && performance.now() - stableSince >= 1_000;
    if (settledDown || performance.now() - sentAt > opts.turnMs / 2) break;
  }
  const before = previous;
  const { active: activeJobs, queued: queuedJobsInWindow } = await jobCounts(env);
  const rssA = await Promise.all(env.workers.map((w) => rssMiB(w.pid)));
  const commandsA = env.embedded.redis ? await commandStats(env) : null;
  const statementsA = env.statementStats ? await statementCalls(env) : null;
  const usageA = await usageSnapshot(env);
  const windowStart = performance.now();
  await sleep(opts.quietMs);
  const usageB = await usageSnapshot(env);
  const quietSeconds = (performance.now() - windowStart) / 1000;
  const statementsB = env.statementStats ? await statementCalls(env) : null;
  const commandsB = env.embedded.redis ? await commandStats(env) : null;
  const rssB = await Promise.all(env.workers.map((w) => rssMiB(w.pid)));
  const after = await sample();
  tick('long turns: quiet window measured');

  const live = before.live;
  const usage = usagePerHandoff(usageA, usageB, Math.max(1, live));
  const perSec = (v: number | null) => (v === null ? null : round(v / quietSeconds, 3));
  const statements =
    statementsA && statementsB ? [...statementsB].reduce((n, [q, calls]) => n + calls - (statementsA.get(q) ?? 0), 0) : null;
  const rates = (a: Map<string, number> | null, b: Map<string, number> | null): RateLine[] | null =>
    a && b
      ? [...b]
          .map(([name, n]) => ({ name, perSecPerTurn: round((n - (a.get(name) ?? 0)) / quietSeconds / Math.max(1, live), 3) }))
          .filter((r) => r.perSecPerTurn > 0)
          .sort((x, y) => y.perSecPerTurn - x.perSecPerTurn)
          .slice(0, 6)
      : null;
  const workerRssLiveMiB = rssA.map((a, i) => (a === null || rssB[i] == null ? null : round((a + rssB[i]) / 2)));
  const idleSum = sumOrNull(workerRssIdleMiB);
  const liveSum = sumOrNull(workerRssLiveMiB);

  // Then every turn runs to its end (a second wave too, when the slots were fewer than the turns).
  for (;;) {
    const c = await sample();
    if (c.ended >= opts.turns) break;
    if (performance.now() - sentAt > opts.turnMs * 4 + 300_000) throw new Error(`only ${c.ended} of ${opts.turns} long turns ended`);
    await sleep(250);
  }
  const timing = await timingsOf(env, projectId);
  const turnsPerWorker = await turnsByWorker(env, projectId);
  const { notOnce, violations } = await writeChecks(env, projectId, new Set(handles));
  const workerWarnings = warningsOf(
    env.workers.map((w, i) => w.output().slice(w.output().length >= (logStart[i] ?? 0) ? (logStart[i] ?? 0) : 0)),
  );
  await env.releaseProcesses(fresh || Object.keys(tuned).length > 0);
  if (fresh) await env.clearRedis();
  tick('long turns: done');

  return {
    turns: opts.turns,
    turnSeconds: opts.turnMs / 1000,
    workers,
    workerConcurrency: tuning.workerConcurrency,
    queueShards: tuning.queueShards,
    // One provider (demo) and the unnamed pool.
    slots: workers * tuning.queueShards * tuning.workerConcurrency,
    peakInFlight,
    turnsPerWorker,
    lastSendToAllReturnedSec: timing.lastSendToAllReturnedSec,
    firstSendToLastAcceptedSec: timing.firstSendToLastAcceptedSec,
    returned: timing.returned,
    liveInWindow: live,
    quietSeconds: round(quietSeconds, 2),
    quietWindowClean: before.key === after.key && before.accepted === 0 && before.sending === 0,
    activeJobsPerLiveTurn: live > 0 ? round(activeJobs / live, 3) : null,
    queuedJobsInWindow,
    workerWarnings,
    workerRssIdleMiB,
    workerRssLiveMiB,
    workerRssKiBPerTurn: idleSum === null || liveSum === null || live === 0 ? null : round(((liveSum - idleSum) * 1024) / live, 1),
    redisCommandsPerSecPerTurn: perSec(usage.redisCommands),
    redisTopCommands: rates(commandsA, commandsB),
    postgresStatementsPerSecPerTurn: statements === null ? null : perSec(statements / Math.max(1, live)),
    postgresTopStatements: rates(statementsA, statementsB),
    cpuMsPerSecPerTurn: { workers: perSec(usage.cpuMs.workers), total: round(usage.cpuMs.total / quietSeconds, 3) },
    handoffsNotWrittenOnce: notOnce,
    writeViolations: violations,
  };
}

const sumOrNull = (xs: Array<number | null>) => (xs.some((x) => x === null) ? null : xs.reduce<number>((a, b) => a + (b ?? 0), 0));

async function idOf(env: BenchEnvironment, slug: string): Promise<string> {
  const { rows } = await env.pool.query<{ id: string }>(`${BENCH_SQL} SELECT id FROM projects WHERE slug = $1`, [slug]);
  if (!rows[0]) throw new Error(`no project ${slug}`);
  return rows[0].id;
}

interface StateCounts {
  live: number;
  accepted: number;
  sending: number;
  ended: number;
  /** Every state's count: equal keys mean nothing moved. */
  key: string;
}

async function stateCounts(env: BenchEnvironment, projectId: string): Promise<StateCounts> {
  const { rows } = await env.pool.query<{ state: string; n: number; settled: number }>(
    `${BENCH_SQL} SELECT delivery_state AS state, count(*)::int AS n, count(*) FILTER (WHERE settled_at IS NOT NULL)::int AS settled
     FROM handoffs WHERE project_id = $1 GROUP BY 1 ORDER BY 1`,
    [projectId],
  );
  const of = (s: string) => rows.find((r) => r.state === s)?.n ?? 0;
  return {
    live: of('ACCEPTED') + of('RUNNING'),
    accepted: of('ACCEPTED'),
    sending: of('SENDING'),
    ended: rows.reduce((n, r) => n + r.settled, 0),
    key: rows.map((r) => `${r.state}=${r.n}`).join(','),
  };
}

/** BullMQ jobs being processed right now, and jobs or wake-ups waiting or delayed, over every delivery queue of the run. */
async function jobCounts(env: BenchEnvironment): Promise<{ active: number; queued: number }> {
  let active = 0;
  let queued = 0;
  // Every queue has its job-id counter; its lists may not exist while empty.
  for (const idKey of await env.scanKeys(`${new RedisNames(env.prefix).bullPrefix}:*:id`)) {
    const base = idKey.slice(0, -':id'.length);
    active += await env.redis.llen(`${base}:active`);
    queued +=
      (await env.redis.llen(`${base}:wait`)) + (await env.redis.zcard(`${base}:delayed`)) + (await env.redis.zcard(`${base}:wake-ups`));
  }
  return { active, queued };
}

/** Warnings and errors in the workers' pino output (level >= 40), counted by message and error. */
function warningsOf(outputs: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of outputs.join('\n').split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } };
      if ((entry.level ?? 0) < 40) continue;
      // Job ids differ per job; counted by kind.
      const err = entry.err?.message?.replace(/\bjob [\w-]+/g, 'job <id>').slice(0, 80);
      const key = err ? `${entry.msg ?? '?'}: ${err}` : (entry.msg ?? '?');
      counts[key] = (counts[key] ?? 0) + 1;
    } catch {
      // not a log line
    }
  }
  return counts;
}

/**
 * Calls per statement Baton sent to this database (pg_stat_statements), the bench's own left
 * out. Postgres 18 stores a statement's text without its leading comment, so the BENCH_SQL
 * mark cannot be matched there; the only bench statements inside the window are its
 * pg_stat_statements reads, left out by name (Baton itself never reads that view).
 */
async function statementCalls(env: BenchEnvironment): Promise<Map<string, number>> {
  const { rows } = await env.pool.query<{ q: string; n: string }>(
    `${BENCH_SQL} SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS q, sum(calls) AS n FROM pg_stat_statements
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND query NOT LIKE '${BENCH_SQL}%' AND query NOT LIKE '%pg_stat_statements%' GROUP BY 1`,
  );
  return new Map(rows.map((r) => [r.q, Number(r.n)]));
}

async function timingsOf(
  env: BenchEnvironment,
  projectId: string,
): Promise<{ lastSendToAllReturnedSec: number; firstSendToLastAcceptedSec: number; returned: number }> {
  const { rows } = await env.pool.query<{
    last_sent: Date;
    first_sent: Date;
    last_settled: Date | null;
    last_accepted: Date | null;
    returned: number;
  }>(
    `${BENCH_SQL} SELECT max(h.created_at) AS last_sent, min(h.created_at) AS first_sent, max(h.settled_at) AS last_settled,
       max(a.accepted_at) AS last_accepted, count(*) FILTER (WHERE h.delivery_state = 'RETURNED')::int AS returned
     FROM handoffs h LEFT JOIN delivery_attempts a ON a.handoff_id = h.id WHERE h.project_id = $1`,
    [projectId],
  );
  const r = rows[0]!;
  const sec = (a: Date | null, b: Date) => (a ? round((a.getTime() - b.getTime()) / 1000, 2) : NaN);
  return {
    lastSendToAllReturnedSec: sec(r.last_settled, r.last_sent),
    firstSendToLastAcceptedSec: sec(r.last_accepted, r.first_sent),
    returned: r.returned,
  };
}

/** Attempts per worker process, in the order the bench started them (worker ids end in the pid). */
async function turnsByWorker(env: BenchEnvironment, projectId: string): Promise<number[]> {
  const { rows } = await env.pool.query<{ worker: string; n: number }>(
    `${BENCH_SQL} SELECT a.worker_id AS worker, count(*)::int AS n FROM delivery_attempts a JOIN handoffs h ON h.id = a.handoff_id
     WHERE h.project_id = $1 GROUP BY 1`,
    [projectId],
  );
  const pidOf = (worker: string) => Number(worker.split('-').at(-1));
  const order = env.workers.map((w) => w.pid);
  return rows.sort((a, b) => order.indexOf(pidOf(a.worker)) - order.indexOf(pidOf(b.worker))).map((r) => r.n);
}

/** Each long-turn handoff written exactly once, and no write breaking a session's promise. */
async function writeChecks(
  env: BenchEnvironment,
  projectId: string,
  sessions: ReadonlySet<string>,
): Promise<{ notOnce: number; violations: number }> {
  const writes = ((await (await fetch(`${env.demoHostUrl}/writes`)).json()) as DemoWrite[]).filter((w) => sessions.has(w.session));
  const { rows } = await env.pool.query<{ id: string }>(`${BENCH_SQL} SELECT id::text AS id FROM handoffs WHERE project_id = $1`, [
    projectId,
  ]);
  const landed = new Map<string, number>();
  for (const w of writes) if (w.answer === 'accepted') landed.set(w.handoffId, (landed.get(w.handoffId) ?? 0) + 1);
  return { notOnce: rows.filter((r) => landed.get(r.id) !== 1).length, violations: findWriteViolations(writes).length };
}
