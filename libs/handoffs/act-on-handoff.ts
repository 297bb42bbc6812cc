import { BatonError } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import type { HandoffView } from '../db/records.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { applyTransition } from './apply-transition.ts';
import type { Actor, CoreDeps } from './ports.ts';
import { resolveProject } from './resolve-project.ts';
import { canSee, EVERYONE, type Viewer } from '../domain/visibility.ts';

/**
 * The handoff, if the viewer may see it (one it may not see is reported exactly like one that
 * does not exist).
 */
async function load(deps: CoreDeps, projectSlug: string, id: string, viewer: Viewer): Promise<HandoffView> {
  const project = await resolveProject(deps, projectSlug);
  const h = isUuid(id) ? await deps.handoffs.findView(project.id, id) : null;
  if (!h || !canSee(h, viewer)) throw new BatonError('handoff_not_found', `no handoff ${JSON.stringify(id)} in project ${project.slug}`);
  return h;
}

/** What an agent acting on a handoff may see: its own view plus what its token sent. */
async function agentViewer(deps: CoreDeps, projectSlug: string, handle: string, tokenId: string | null | undefined): Promise<Viewer> {
  const project = await resolveProject(deps, projectSlug);
  const agent = await deps.agents.findActive(project.id, handle.toLowerCase());
  if (!agent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(handle)} in project ${project.slug}`);
  return { agentId: agent.id, tokenId: tokenId ?? null, allOwners: false };
}

async function reread(deps: CoreDeps, h: HandoffView): Promise<HandoffView> {
  const again = await deps.handoffs.findView(h.projectId, h.id);
  if (!again) throw new BatonError('handoff_not_found', `handoff ${h.id} disappeared`);
  return again;
}

/**
 * The recipient marks a plain message read: ACKNOWLEDGED, no turn needed (if it was still
 * queued, it is not delivered). Work (a handoff with a title) is returned instead.
 * @throws BatonError handoff_not_found, not_recipient, not_a_message, invalid_transition, stale_revision
 */
export async function acknowledgeHandoff(deps: CoreDeps, input: { project: string; id: string; as: string; tokenId?: string | null }): Promise<HandoffView> {
  const h = await load(deps, input.project, input.id, await agentViewer(deps, input.project, input.as, input.tokenId));
  const as = input.as.toLowerCase();
  if (h.recipientHandle !== as) throw new BatonError('not_recipient', `${as} is not the recipient of handoff ${h.id}`);
  if (h.title !== null) throw new BatonError('not_a_message', `handoff ${h.id} is work ("${h.title}"); it is returned, not acknowledged`);
  const actor: Actor = { kind: 'recipient', id: as, tokenId: input.tokenId ?? null };
  await applyTransition(deps, h, 'acknowledged', actor, { reason: 'read by the recipient', patch: { deliveryDetail: null } });
  return reread(deps, h);
}

/**
 * A person who knows how a stuck delivery ended releases it: UNCERTAIN (or a turn that hangs,
 * ACCEPTED/RUNNING) becomes CANCELLED. Nothing is resent either way, and the recipient's
 * queue moves on (a session still busy is still waited for). Without `as` the caller acts as
 * an operator (the API allows that to admin tokens only); with `as` it must be the sender.
 * @throws BatonError handoff_not_found, not_sender, invalid_transition, stale_revision
 */
export async function releaseHandoff(
  deps: CoreDeps,
  input: { project: string; id: string; as?: string | undefined; reason?: string | undefined; tokenId?: string | null },
): Promise<HandoffView> {
  const viewer = input.as === undefined ? EVERYONE : await agentViewer(deps, input.project, input.as, input.tokenId);
  const h = await load(deps, input.project, input.id, viewer);
  let actor: Actor = { kind: 'operator', id: 'operator', tokenId: input.tokenId ?? null };
  if (input.as !== undefined) {
    const as = input.as.toLowerCase();
    if (h.senderHandle !== as) throw new BatonError('not_sender', `${as} is not the sender of handoff ${h.id}`);
    actor = { kind: 'sender', id: as, tokenId: input.tokenId ?? null };
  }
  const attempt = await deps.handoffs.latestAttempt(h.id);
  const why = input.reason?.trim() || 'no reason given';
  const moved = await applyTransition(deps, h, 'released', actor, {
    reason: why,
    patch: { deliveryDetail: `released by ${actor.id}: ${why}; not resent` },
    ...(attempt && !attempt.finishedAt ? { updateAttempt: { id: attempt.id, status: 'cancelled' as const, finished: true } } : {}),
  });
  if (h.recipientId && h.provider && h.provider !== 'manual') {
    await deps.scheduler
      .enqueue({ agentId: h.recipientId, provider: h.provider, cause: 'due' }, JOB_IDS.released(h.id, moved.revision))
      .catch((err: unknown) => deps.logger.warn({ err, handoffId: h.id }, 'could not queue the recipient after a release; the sweep will'));
  }
  return reread(deps, h);
}
