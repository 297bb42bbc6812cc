import type { HandoffRecord } from '../db/records.ts';
import { routeOf } from '../queue/dispatch-job.ts';
import type { CoreDeps } from './ports.ts';

/** What waking a recipient touches: who owns the recipient, the queues, the log. */
export type WakeDeps = Pick<CoreDeps, 'deployment' | 'agents' | 'scheduler' | 'logger'>;

/**
 * After a person or the sender moved a handoff back into its recipient's queue (a release, a
 * revision): queues a `due` wake-up for the recipient under `jobId`, if a push recipient of this
 * deployment. The recipient of another deployment is left to that deployment's sweep, which
 * finds the work in Postgres: a job on our queues would only wake workers that may not deliver
 * to it. Never throws: a lost wake-up is also found by the sweep.
 */
export async function wakeRecipient(
  deps: WakeDeps,
  h: Pick<HandoffRecord, 'id' | 'recipientId' | 'provider' | 'pool'>,
  jobId: string,
): Promise<void> {
  if (!h.recipientId || !h.provider || h.provider === 'manual') return;
  try {
    const recipient = await deps.agents.findById(h.recipientId);
    if (recipient?.deployment !== deps.deployment) {
      deps.logger.debug(
        { handoffId: h.id, deployment: recipient?.deployment ?? null },
        'recipient belongs to another deployment; its sweep delivers it',
      );
      return;
    }
    await deps.scheduler.enqueue(
      { ...routeOf({ recipientId: h.recipientId, provider: h.provider, pool: h.pool }), cause: 'due', handoffId: h.id },
      jobId,
    );
  } catch (err) {
    deps.logger.warn({ err, handoffId: h.id }, 'could not queue the recipient; the sweep will');
  }
}
