import type { BenchEnvironment } from '../bench-environment.ts';
import type { JsonClient, LoadResult } from '../http-load.ts';
import { round } from '../measure.ts';
import { registerAgents, sendMany } from './common.ts';
import { redisUsedMemory, usagePerHandoff, usageSnapshot, type UsagePerHandoff } from '../usage.ts';

export interface SendResults {
  oneClient: LoadResult;
  thirtyTwoClients: LoadResult;
  /** What each send at 32 clients cost: CPU by process (API, Postgres, Redis, the load generator), statements, commands. */
  thirtyTwoClientsCost: UsagePerHandoff;
  /**
   * Redis memory per handoff waiting for delivery (no worker running: each recipient waits once
   * in its queue's wake-up set, behind one wake job per queue), bytes, over every handoff this
   * scenario sent. 0 when the growth is below what INFO memory can tell apart.
   */
  redisBytesPerQueuedHandoff: number;
  /** The same memory per recipient with handoffs waiting. */
  redisBytesPerWaitingAgent: number;
  /** How many recipients the queued handoffs were spread over. */
  recipients: number;
  /** How many handoffs were waiting when the memory was read. */
  queuedHandoffs: number;
}

/**
 * Send throughput of the HTTP API alone (no worker competing for the CPU): handoffs accepted
 * per second and latency at 1 and 32 concurrent clients. The queued jobs also give Redis's
 * memory cost per queued handoff.
 */
export async function measureSend(
  env: BenchEnvironment,
  client: JsonClient,
  opts: { one: number; many: number },
  tick: () => void,
): Promise<SendResults> {
  const project = 'bench-send';
  await env.createProject(project);
  const recipients = Array.from({ length: 100 }, (_, i) => `send-r${i}`);
  await registerAgents(client, project, ['send-s', ...recipients]);
  const body = (tag: string) => (i: number) => ({
    from: 'send-s',
    to: recipients[i % recipients.length],
    title: `${tag} ${i}`,
    message: `Handoff ${tag} ${i}: ${'context '.repeat(40)}`,
  });
  // Before the first send: what waits in Redis for delivery is per recipient (its place in the
  // wake-up set), so the first handoffs to each recipient are the ones that cost memory.
  const memBefore = await redisUsedMemory(env);
  // Warm the API up (JIT, connection pools) before timing.
  const warmup = 200;
  await sendMany(client, project, warmup, 8, body('warmup'));
  const oneClient = await sendMany(client, project, opts.one, 1, body('one'));
  tick();
  const usageBefore = await usageSnapshot(env);
  const thirtyTwoClients = await sendMany(client, project, opts.many, 32, body('many'));
  const thirtyTwoClientsCost = usagePerHandoff(usageBefore, await usageSnapshot(env), opts.many);
  const memAfter = await redisUsedMemory(env);
  const grown = Math.max(0, memAfter - memBefore);
  tick();
  // No worker runs here: these handoffs stay WAITING. Remove them so later scenarios start clean.
  await env.pool.query(`DELETE FROM handoffs WHERE project_id = (SELECT id FROM projects WHERE slug = $1)`, [project]);
  await env.clearRedis();
  return {
    oneClient,
    thirtyTwoClients,
    thirtyTwoClientsCost,
    redisBytesPerQueuedHandoff: round(grown / (warmup + opts.one + opts.many), 0),
    redisBytesPerWaitingAgent: round(grown / recipients.length, 0),
    recipients: recipients.length,
    queuedHandoffs: warmup + opts.one + opts.many,
  };
}
