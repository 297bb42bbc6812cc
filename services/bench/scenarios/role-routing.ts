import type { BenchEnvironment } from '../bench-environment.ts';
import type { JsonClient } from '../http-load.ts';
import { runLoad } from '../http-load.ts';
import { round } from '../measure.ts';
import { sendMany, waitSettled } from './common.ts';

/** One way of spreading the handoffs: its time and each agent's share. */
export interface SpreadRun {
  /** First send to last turn returned (the rows' own times), seconds. */
  seconds: number;
  /** Handoffs each agent got, in the order of `turnMs`. */
  load: number[];
}

export interface RoleRoutingResult {
  handoffs: number;
  /** Each agent's turn length (the demo's think time), ms: uneven on purpose. */
  turnMs: number[];
  /** Sent to `@role:<name>`, bound at dispatch time. */
  role: SpreadRun;
  /** The same handoffs spread round-robin over the same agents at send time. */
  roundRobin: SpreadRun;
  /** Each agent's fair share when the load follows its speed: handoffs × (1/turn) / Σ(1/turn). */
  fairShare: number[];
  /** The routed load's largest distance from the fair share, as a fraction of the handoffs. */
  maxShareGap: number;
  /** Writes that reached a session while it was in a turn, and handoffs not written exactly once (both must be 0). */
  overlappingTurns: number;
  handoffsNotWrittenOnce: number;
}

/** How far from its fair share (a fraction of all the handoffs) any agent's routed load may be: docs/PERFORMANCE.md. */
export const ROLE_SHARE_GAP_BOUND = 0.05;

async function register(client: JsonClient, project: string, handles: readonly string[], turnMs: readonly number[], roles: string[]) {
  const result = await runLoad(handles.length, 16, (i) =>
    client.request(
      'POST',
      '/v1/agents',
      { id: handles[i], provider: 'demo', roles, settings: { thinkMs: turnMs[i] } },
      { 'x-baton-project': project },
    ),
  );
  if (result.errors > 0) throw new Error(`registering agents failed: ${JSON.stringify(result.statuses)}`);
}

async function spreadRun(env: BenchEnvironment, project: string, handles: readonly string[]): Promise<SpreadRun> {
  const { rows } = await env.pool.query<{ handle: string; n: number; first: Date; last: Date }>(
    `SELECT r.handle, count(*)::int AS n, min(h.created_at) AS first, max(h.settled_at) AS last
     FROM handoffs h JOIN agents r ON r.id = h.recipient_id
     WHERE h.project_id = (SELECT id FROM projects WHERE slug = $1) AND h.delivery_state = 'RETURNED' GROUP BY r.handle`,
    [project],
  );
  const first = Math.min(...rows.map((r) => r.first.getTime()));
  const last = Math.max(...rows.map((r) => r.last.getTime()));
  return { seconds: round((last - first) / 1000, 2), load: handles.map((h) => rows.find((r) => r.handle === h)?.n ?? 0) };
}

/**
 * Issue 34's routing benchmark: `handoffs` handoffs to a role of agents with uneven turn lengths
 * (bound at dispatch time: the idle agent takes the next), against the same handoffs spread
 * round-robin over the same agents at send time. Both in one set of processes, the routed run
 * first (it gets the colder processes). Reports both times, each agent's load, how far the
 * routed load is from each agent's speed-proportional share, and the exactly-once proof.
 */
export async function measureRoleRouting(
  env: BenchEnvironment,
  opts: { handoffs: number; turnMs: readonly number[] },
  fresh: boolean,
  tick: (label: string) => void,
): Promise<RoleRoutingResult> {
  await env.resetDemoHost();
  const client = await env.processes(fresh);
  const n = opts.turnMs.length;
  const run = async (project: string, prefix: string, to: (i: number) => string, roles: string[]) => {
    await env.createProject(project);
    const handles = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
    await register(client, project, handles, opts.turnMs, roles);
    await register(client, project, [`${prefix}-sender`], [0], []);
    await sendMany(client, project, opts.handoffs, 32, (i) => ({
      from: `${prefix}-sender`,
      to: to(i),
      title: `job ${i}`,
      message: `job ${i}`,
    }));
    await waitSettled(env.pool, project, opts.handoffs, 120_000);
    return { handles, spread: await spreadRun(env, project, handles) };
  };
  tick('role routing: to a role');
  const role = await run('roles-routed', 'routed', () => '@role:bench', ['bench']);
  tick('role routing: round-robin');
  const rr = await run('roles-rr', 'rr', (i) => `rr-${i % n}`, []);

  const speed = opts.turnMs.map((t) => 1 / t);
  const total = speed.reduce((a, b) => a + b, 0);
  const fairShare = speed.map((s) => round((opts.handoffs * s) / total, 1));
  const maxShareGap = round(Math.max(...role.spread.load.map((l, i) => Math.abs(l - fairShare[i]!) / opts.handoffs)), 3);

  const stats = await env.demoStats();
  const sessions = new Set([...role.handles, ...rr.handles]);
  const overlappingTurns = stats.sessions.filter((s) => sessions.has(s.session)).reduce((sum, s) => sum + s.overlapAttempts, 0);
  const { rows } = await env.pool.query<{ id: string }>(
    `SELECT h.id::text AS id FROM handoffs h JOIN projects p ON p.id = h.project_id WHERE p.slug IN ('roles-routed', 'roles-rr')`,
  );
  const handoffsNotWrittenOnce = rows.filter((r) => (stats.writesByHandoff[r.id]?.length ?? 0) !== 1).length;
  await env.releaseProcesses(fresh);
  if (fresh) await env.clearRedis();
  tick('role routing: done');
  return {
    handoffs: opts.handoffs,
    turnMs: [...opts.turnMs],
    role: role.spread,
    roundRobin: rr.spread,
    fairShare,
    maxShareGap,
    overlappingTurns,
    handoffsNotWrittenOnce,
  };
}
