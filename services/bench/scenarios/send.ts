import type { BenchEnvironment } from '../bench-environment.ts';
import type { JsonClient, LoadResult } from '../http-load.ts';
import { round } from '../measure.ts';
import { registerAgents, sendMany } from './common.ts';
import { redisUsedMemory } from '../usage.ts';

export interface SendResults {
  oneClient: LoadResult;
  thirtyTwoClients: LoadResult;
  /** Redis memory per handoff waiting for delivery (no worker running: its wake-up job waits), bytes. */
  redisBytesPerQueuedHandoff: number;
  /** The same memory per recipient with handoffs waiting. */
  redisBytesPerWaitingAgent: number;
  /** How many recipients the queued handoffs were spread over. */
  recipients: number;
}

/**
 * Send throughput of the HTTP API alone (no worker competing for the CPU): handoffs accepted
 * per second and latency at 1 and 32 concurrent clients. The queued jobs also give Redis's
 * memory cost per queued handoff.
 */
export async function measureSend(env: BenchEnvironment, client: JsonClient, opts: { one: number; many: number }, tick: () => void): Promise<SendResults> {
  const project = 'bench-send';
  await env.createProject(project);
  const recipients = Array.from({ length: 100 }, (_, i) => `send-r${i}`);
  await registerAgents(client, project, ['send-s', ...recipients]);
  const body = (tag: string) => (i: number) => ({ from: 'send-s', to: recipients[i % recipients.length], title: `${tag} ${i}`, message: `Handoff ${tag} ${i}: ${'context '.repeat(40)}` });
  // Warm the API up (JIT, connection pools) before timing.
  await sendMany(client, project, 200, 8, body('warmup'));
  const oneClient = await sendMany(client, project, opts.one, 1, body('one'));
  tick();
  const memBefore = await redisUsedMemory(env);
  const thirtyTwoClients = await sendMany(client, project, opts.many, 32, body('many'));
  const memAfter = await redisUsedMemory(env);
  tick();
  // No worker runs here: these handoffs stay WAITING. Remove them so later scenarios start clean.
  await env.pool.query(`DELETE FROM handoffs WHERE project_id = (SELECT id FROM projects WHERE slug = $1)`, [project]);
  await env.clearRedis();
  return {
    oneClient,
    thirtyTwoClients,
    redisBytesPerQueuedHandoff: round((memAfter - memBefore) / opts.many, 0),
    redisBytesPerWaitingAgent: round((memAfter - memBefore) / recipients.length, 0),
    recipients: recipients.length,
  };
}


