import { BatonError } from '../domain/errors.ts';
import type { HandoffView } from '../db/records.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { applyTransition } from './apply-transition.ts';
import type { Actor, TransitionDeps } from './ports.ts';
import type { Viewer } from '../domain/visibility.ts';
import { loadAsAgent, loadVisible, reread, type LoadDeps } from './load-handoff.ts';
import { wakeRecipient, type WakeDeps } from './wake-recipient.ts';

/** What acknowledging touches: the load, the move, the read-back. */
export type AcknowledgeDeps = LoadDeps & TransitionDeps;

/** What a release touches: as an acknowledgement, and the recipient's wake-up. */
export type ReleaseDeps = LoadDeps & TransitionDeps & WakeDeps;

/**
 * The recipient marks a plain message read: ACKNOWLEDGED, no turn needed (if it was still
 * queued, it is not delivered). Work (a handoff with a title) is returned instead.
 * @throws BatonError handoff_not_found, not_recipient, not_a_message, invalid_transition, stale_revision
 */
export async function acknowledgeHandoff(
  deps: AcknowledgeDeps,
  input: { project: string; id: string; as: string; tokenId?: string | null },
): Promise<HandoffView> {
  const { h } = await loadAsAgent(deps, input);
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
 * an operator (the API allows that to admin tokens only) on a handoff `viewer` may see (an
 * admin's owned-by-others handoffs need `all_owners`, as for reading them); with `as` it must
 * be the sender.
 * @throws BatonError handoff_not_found, not_sender, invalid_transition, stale_revision
 */
export async function releaseHandoff(
  deps: ReleaseDeps,
  input: { project: string; id: string; as?: string | undefined; reason?: string | undefined; tokenId?: string | null; viewer: Viewer },
): Promise<HandoffView> {
  const h =
    input.as === undefined
      ? await loadVisible(deps, input.project, input.id, input.viewer)
      : (await loadAsAgent(deps, { ...input, as: input.as })).h;
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
  await wakeRecipient(deps, h, JOB_IDS.released(h.id, moved.revision));
  return reread(deps, h);
}
