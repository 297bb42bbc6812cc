import type { BenchEnvironment } from '../bench-environment.ts';
import type { DeliverySeries } from '../plot-data.ts';
import { BENCH_SQL } from '../usage.ts';
import { deliveryMetrics, registerAgents, sendMany, waitSettled } from './common.ts';

export interface DispatchLatencyResult {
  agents: number;
  /** The paced send rate (open loop: sends do not wait for each other). */
  perSecond: number;
  handoffs: number;
  errors: number;
  dispatchP50Ms: number;
  dispatchP99Ms: number;
  acceptedP50Ms: number;
  acceptedP99Ms: number;
  returnedP50Ms: number;
  returnedP99Ms: number;
  /** Latency distributions and rates over time, for the HTML report. */
  series?: DeliverySeries;
}

/**
 * Dispatch latency without a backlog: handoffs sent at a steady `perSecond` (open loop) to idle
 * zero-think agents, so each one finds its recipient free and the figure is the path itself
 * (commit -> wake-up -> worker -> lock -> reserve -> adapter call), not time spent queued
 * behind earlier handoffs, which is what the saturated end-to-end runs measure.
 */
export async function measureDispatchLatency(
  env: BenchEnvironment,
  opts: { agents: number; perSecond: number; handoffs: number },
  fresh: boolean,
  tick: (label: string) => void,
): Promise<DispatchLatencyResult> {
  const project = 'latency';
  await env.createProject(project);
  await env.resetDemoHost();
  const client = await env.processes(fresh);
  const handles = Array.from({ length: opts.agents }, (_, i) => `lat-${i}`);
  await registerAgents(client, project, ['lat-sender', ...handles], { thinkMs: 0 });
  const body = (tag: string) => (i: number) => ({
    from: 'lat-sender',
    to: handles[i % handles.length],
    title: `${tag} ${i}`,
    message: `Latency probe ${i}`,
  });
  // Warm up (JIT, pools, prepared statements), then forget the warm-up handoffs.
  await sendMany(client, project, Math.min(200, opts.handoffs), 8, body('warmup'));
  await waitSettled(env.pool, project, Math.min(200, opts.handoffs), 60_000);
  await env.pool.query(`${BENCH_SQL} DELETE FROM handoffs WHERE project_id = (SELECT id FROM projects WHERE slug = $1)`, [project]);

  const intervalMs = 1000 / opts.perSecond;
  const started = performance.now();
  const sends: Array<Promise<number>> = [];
  const probe = body('probe');
  for (let i = 0; i < opts.handoffs; i++) {
    const due = started + i * intervalMs;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    sends.push(
      client.request('POST', '/v1/handoffs', probe(i), { 'x-baton-project': project }).then(
        (r) => r.status,
        () => 0,
      ),
    );
  }
  const statuses = await Promise.all(sends);
  await waitSettled(env.pool, project, opts.handoffs, 60_000);
  const m = await deliveryMetrics(env.pool, project);
  await env.releaseProcesses(fresh);
  tick('dispatch latency at a steady rate');
  return {
    agents: opts.agents,
    perSecond: opts.perSecond,
    handoffs: m.handoffs,
    errors: statuses.filter((s) => s === 0 || s >= 300).length,
    dispatchP50Ms: m.dispatchP50Ms,
    dispatchP99Ms: m.dispatchP99Ms,
    acceptedP50Ms: m.acceptedP50Ms,
    acceptedP99Ms: m.acceptedP99Ms,
    returnedP50Ms: m.returnedP50Ms,
    returnedP99Ms: m.returnedP99Ms,
    series: m.series,
  };
}
