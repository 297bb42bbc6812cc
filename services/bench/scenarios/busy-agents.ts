import type { BenchEnvironment } from '../bench-environment.ts';
import { round } from '../measure.ts';
import { registerAgents, sendMany, waitSettled } from './common.ts';

export interface BusyAgentsResult {
  agents: number;
  handoffsPerAgent: number;
  totalSeconds: number;
  /** Writes that reached a session while it was in a turn (must be 0). */
  overlappingTurns: number;
  /** Agents whose turns arrived in a different order than their handoffs were recorded (must be 0). */
  agentsOutOfOrder: number;
  /** Handoffs written to a session more or less than once (must be 0). */
  handoffsNotWrittenOnce: number;
}

/**
 * 100 agents each receiving 50 handoffs at once: total time to deliver all, and the proof
 * that no agent had two turns at once and that each agent's turns came in send order.
 */
export async function measureBusyAgents(
  env: BenchEnvironment,
  agents: number,
  perAgent: number,
  fresh: boolean,
  tick: (label: string) => void,
): Promise<BusyAgentsResult> {
  const project = 'busy';
  await env.createProject(project);
  await env.resetDemoHost();
  const client = await env.processes(fresh);
  const handles = Array.from({ length: agents }, (_, i) => `busy-${i}`);
  await registerAgents(client, project, ['busy-sender', ...handles], { thinkMs: 0 });
  tick('busy agents: sending');
  const started = performance.now();
  await sendMany(client, project, agents * perAgent, 64, (i) => ({
    from: 'busy-sender',
    to: handles[i % agents],
    title: `burst ${i}`,
    message: `burst ${i}`,
  }));
  await waitSettled(env.pool, project, agents * perAgent, 300_000);
  const totalSeconds = round((performance.now() - started) / 1000, 2);

  const stats = await env.demoStats();
  const { rows } = await env.pool.query<{ handle: string; ids: string[] }>(
    `SELECT r.handle, array_agg(h.id::text ORDER BY h.seq) AS ids FROM handoffs h JOIN agents r ON r.id = h.recipient_id
     WHERE h.project_id = (SELECT id FROM projects WHERE slug = $1) GROUP BY r.handle`,
    [project],
  );
  let agentsOutOfOrder = 0;
  let handoffsNotWrittenOnce = 0;
  for (const r of rows) {
    const history = await env.demoHistory(r.handle);
    if (history.map((t) => t.handoffId).join() !== r.ids.join()) agentsOutOfOrder++;
    for (const id of r.ids) if ((stats.writesByHandoff[id]?.length ?? 0) !== 1) handoffsNotWrittenOnce++;
  }
  const overlappingTurns = stats.sessions.filter((s) => s.session.startsWith('busy-')).reduce((n, s) => n + s.overlapAttempts, 0);
  await env.releaseProcesses(fresh);
  if (fresh) await env.clearRedis();
  tick('busy agents: done');
  return { agents, handoffsPerAgent: perAgent, totalSeconds, overlappingTurns, agentsOutOfOrder, handoffsNotWrittenOnce };
}
