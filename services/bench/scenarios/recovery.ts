import type { BenchEnvironment } from '../bench-environment.ts';
import { round } from '../measure.ts';
import { registerAgents, sendMany } from './common.ts';

export interface RecoveryResult {
  /** SIGKILL of the worker writing a turn -> the handoff is UNCERTAIN (another worker noticed). */
  killToUncertainSec: number;
  /** Handoffs recorded but not yet final when Redis was wiped (sending goes on after it). */
  openAtWipe: number;
  /** FLUSHALL (or, on a shared Redis, deleting every Baton key) -> every handoff final again. */
  wipeToFinalSec: number;
  /** The longest time after the wipe in which no new turn started: how long delivery stalled. */
  stallAfterWipeSec: number;
}

/** Crash recovery, timed: a worker killed mid-write, and Redis wiped mid-run. */
export async function measureRecovery(
  env: BenchEnvironment,
  wipeHandoffs: number,
  fresh: boolean,
  tick: (label: string) => void,
): Promise<RecoveryResult> {
  const project = 'recovery';
  await env.createProject(project);
  await env.resetDemoHost();
  const client = await env.processes(fresh);
  await registerAgents(client, project, ['rec-sender']);
  // Answers the writer 30 s late: a worker killed in that window has reserved and written.
  await registerAgents(client, project, ['rec-slow'], { replyDelayMs: 30_000 });
  const wipeAgents = Array.from({ length: 100 }, (_, i) => `rec-${i}`);
  await registerAgents(client, project, wipeAgents, { thinkMs: 5 });

  // 1. SIGKILL the worker in the middle of a write.
  const sent = await client.request(
    'POST',
    '/v1/handoffs',
    { from: 'rec-sender', to: 'rec-slow', title: 'killed mid-write', message: 'x' },
    { 'x-baton-project': project },
  );
  const id = sent.body.id as string;
  let workerId: string | undefined;
  for (let i = 0; i < 200 && !workerId; i++) {
    const { rows } = await env.pool.query<{ worker_id: string }>(`SELECT worker_id FROM delivery_attempts WHERE handoff_id = $1`, [id]);
    workerId = rows[0]?.worker_id;
    if (!workerId) await new Promise((r) => setTimeout(r, 25));
  }
  const pid = Number(workerId?.split('-').at(-1));
  const victim = env.workers.find((w) => w.pid === pid);
  if (!victim) throw new Error(`could not find the worker writing the turn (${workerId})`);
  victim.child.kill('SIGKILL');
  const killedAt = Date.now();
  env.workers = env.workers.filter((w) => w !== victim);
  let killToUncertainSec = NaN;
  for (let i = 0; i < 600; i++) {
    const { rows } = await env.pool.query<{ at: Date }>(
      `SELECT created_at AS at FROM handoff_events WHERE handoff_id = $1 AND event = 'reply_lost'`,
      [id],
    );
    if (rows[0]) {
      killToUncertainSec = round((rows[0].at.getTime() - killedAt) / 1000, 2);
      break;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  tick('recovery: worker killed');
  const replacement = env.startWorkers(1);

  // 2. Wipe Redis while a run is under way.
  await replacement;
  const sending = sendMany(client, project, wipeHandoffs, 32, (i) => ({
    from: 'rec-sender',
    to: wipeAgents[i % wipeAgents.length],
    title: `wipe ${i}`,
    message: `wipe ${i}`,
  }));
  let openAtWipe: number;
  for (;;) {
    const { rows } = await env.pool.query<{ open: number; settled: number }>(
      `SELECT count(*) FILTER (WHERE settled_at IS NULL)::int AS open, count(*) FILTER (WHERE settled_at IS NOT NULL)::int AS settled
       FROM handoffs WHERE project_id = (SELECT id FROM projects WHERE slug = $1) AND title LIKE 'wipe %'`,
      [project],
    );
    if ((rows[0]?.settled ?? 0) >= wipeHandoffs * 0.3) {
      openAtWipe = rows[0]?.open ?? 0;
      break;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const wipedAt = performance.now();
  const wipedAtWall = Date.now();
  if (env.embedded.redis) await env.redis.flushall();
  else await env.clearRedis();
  await sending;
  // The killed-mid-write handoff is UNCERTAIN until its history is scanned; count only the run.
  await waitSettledExcept(env, project, id);
  const wipeToFinalSec = round((performance.now() - wipedAt) / 1000, 2);
  const stallAfterWipeSec = await longestStall(env, project, wipedAtWall);
  await env.releaseProcesses(true);
  await env.clearRedis();
  tick('recovery: redis wiped');
  return { killToUncertainSec, openAtWipe, wipeToFinalSec, stallAfterWipeSec };
}

/** The longest gap between the wipe and the turns started after it (or between two of them). */
async function longestStall(env: BenchEnvironment, project: string, sinceMs: number): Promise<number> {
  const { rows } = await env.pool.query<{ at: Date }>(
    `SELECT a.started_at AS at FROM delivery_attempts a JOIN handoffs h ON h.id = a.handoff_id
     WHERE h.project_id = (SELECT id FROM projects WHERE slug = $1) AND a.started_at >= $2 ORDER BY a.started_at`,
    [project, new Date(sinceMs)],
  );
  let previous = sinceMs;
  let longest = 0;
  for (const { at } of rows) {
    longest = Math.max(longest, at.getTime() - previous);
    previous = at.getTime();
  }
  return round(longest / 1000, 2);
}

async function waitSettledExcept(env: BenchEnvironment, project: string, exceptId: string): Promise<void> {
  const started = performance.now();
  for (;;) {
    const { rows } = await env.pool.query<{ open: number }>(
      `SELECT count(*)::int AS open FROM handoffs WHERE project_id = (SELECT id FROM projects WHERE slug = $1) AND settled_at IS NULL AND id <> $2`,
      [project, exceptId],
    );
    if ((rows[0]?.open ?? 1) === 0) return;
    if (performance.now() - started > 120_000)
      throw new Error(`${rows[0]?.open} handoffs still open 120 s after the wipe: ${await describeOpen(env, project, exceptId)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Where the open handoffs stand, for the error when they do not settle: state, attempts, last events. */
async function describeOpen(env: BenchEnvironment, project: string, exceptId: string): Promise<string> {
  const { rows } = await env.pool.query<{ id: string; state: string; attempts: number; events: string }>(
    `SELECT h.id, h.delivery_state AS state, h.attempt_count AS attempts,
       (SELECT string_agg(e.event || '@' || coalesce(e.actor_id, '-'), ' > ' ORDER BY e.id) FROM handoff_events e WHERE e.handoff_id = h.id) AS events
     FROM handoffs h WHERE h.project_id = (SELECT id FROM projects WHERE slug = $1) AND h.settled_at IS NULL AND h.id <> $2 ORDER BY h.seq LIMIT 5`,
    [project, exceptId],
  );
  return rows.map((r) => `${r.id} ${r.state}, ${r.attempts} attempts: ${r.events}`).join('; ');
}
