import { createHash } from 'node:crypto';
import { BatonError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import { planTransition } from '../domain/transitions.ts';
import type { HandoffRecord, HandoffView } from '../db/records.ts';
import type { HandoffRepository } from '../db/handoff-repository.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import type { Actor, CoreDeps } from './ports.ts';
import { findAgents, resolveProject } from './resolve-project.ts';

export interface SendHandoffInput {
  project: string;
  from: string;
  to: string;
  message: string;
  title?: string | null | undefined;
  focus?: string | null | undefined;
  doneWhen?: string | null | undefined;
  context?: { summary?: string | null | undefined; openQuestions?: string[] | undefined; nextSteps?: string[] | undefined } | undefined;
  dueAt?: Date | null | undefined;
  idempotencyKey?: string | null | undefined;
  tokenId?: string | null | undefined;
}

export interface SendHandoffResult {
  handoff: HandoffView;
  /** false when an earlier send with the same idempotency key is returned instead. */
  created: boolean;
}

export function contentHash(recipientId: string, input: SendHandoffInput): string {
  const c = input.context ?? {};
  return createHash('sha256')
    .update(
      JSON.stringify([recipientId, input.title ?? null, input.message, input.focus ?? null, input.doneWhen ?? null, c.summary ?? null, c.openQuestions ?? [], c.nextSteps ?? []]),
    )
    .digest('hex');
}

/**
 * Records a handoff and queues it for its recipient. A send identical to one still in
 * progress (same sender, recipient and content, no idempotency key) is recorded as DUPLICATE
 * of it and not delivered. The record (and its `enrolled` event) is
 * committed first; the dispatch job is added after the commit with a deterministic id, so a
 * lost enqueue is repaired by the reconciler and a repeated one is a no-op. The recipient's
 * session at this moment is snapshotted: the handoff is delivered there or nowhere.
 * @throws BatonError project_not_found, unknown_sender, unknown_recipient, idempotency_conflict, database_unavailable
 */
export async function sendHandoff(deps: CoreDeps, input: SendHandoffInput): Promise<SendHandoffResult> {
  const project = await resolveProject(deps, input.project);
  const from = input.from.toLowerCase();
  const to = input.to.toLowerCase();
  const [sender, recipient] = await findAgents(deps, project, [from, to]);
  if (!sender) throw new BatonError('unknown_sender', `no agent ${JSON.stringify(from)} in project ${project.slug}`);
  if (!recipient) throw new BatonError('unknown_recipient', `no agent ${JSON.stringify(to)} in project ${project.slug}`);
  const view = (h: Omit<HandoffView, 'senderHandle' | 'recipientHandle'>): HandoffView => ({ ...h, senderHandle: sender.handle, recipientHandle: recipient.handle });

  const key = input.idempotencyKey ?? null;
  const hash = contentHash(recipient.id, input);
  // A repeated key returns the first handoff, but only for the same request: a different
  // recipient or content under a used key is a conflict, never a silent no-op.
  const replay = (existing: HandoffRecord): SendHandoffResult => {
    if (existing.contentHash !== hash) {
      throw new BatonError('idempotency_conflict', `idempotency key ${JSON.stringify(key)} was already used by ${sender.handle} for handoff ${existing.id} with different content`, {
        handoffId: existing.id,
      });
    }
    return { handoff: view(existing), created: false };
  };
  if (key !== null) {
    const existing = await deps.handoffs.findByIdempotencyKey(sender.id, key);
    if (existing) return replay(existing);
  }

  const actor: Actor = { kind: 'sender', id: sender.handle, tokenId: input.tokenId ?? null };
  const now = deps.clock.now();
  const enroll = async (repo: HandoffRepository, duplicateOf: HandoffRecord | null) => {
    const event = duplicateOf ? 'duplicate_detected' : 'enrolled';
    const state = planTransition(null, event, actor.kind);
    return repo.insert(
      {
        id: newId(now.getTime()),
        projectId: project.id,
        senderId: sender.id,
        recipientId: recipient.id,
        recipientGeneration: recipient.generation,
        provider: recipient.provider,
        deliveryTarget: recipient.deliveryTarget,
        title: input.title ?? null,
        message: input.message,
        focus: input.focus ?? null,
        doneWhen: input.doneWhen ?? null,
        contextSummary: input.context?.summary ?? null,
        openQuestions: input.context?.openQuestions ?? [],
        nextSteps: input.context?.nextSteps ?? [],
        dueAt: input.dueAt ?? null,
        idempotencyKey: key,
        contentHash: hash,
        duplicateOfId: duplicateOf?.id ?? null,
        deliveryState: state,
        deliveryDetail: duplicateOf ? `same content as ${duplicateOf.id}, which is still ${duplicateOf.deliveryState}; not delivered` : null,
        workState: input.title ? 'open' : null,
        createdAt: now,
      },
      {
        event,
        actorKind: actor.kind,
        actorId: actor.id,
        tokenId: actor.tokenId ?? null,
        ...(duplicateOf ? { reason: `duplicate of ${duplicateOf.id}`, detail: { duplicateOf: duplicateOf.id } } : {}),
      },
    );
  };
  // With an idempotency key the unique index decides; without one, an identical handoff still
  // in progress makes this one a DUPLICATE. The advisory lock makes that check race-free.
  const inserted =
    key !== null
      ? await enroll(deps.handoffs, null)
      : await deps.handoffs.withLock(`enroll:${sender.id}:${recipient.id}:${hash}`, async (tx) =>
          enroll(tx, await tx.findInProgressDuplicate(sender.id, recipient.id, hash)),
        );
  if (!inserted) {
    // Lost a race on the idempotency key: the winner is committed (ON CONFLICT waited for it).
    const winner = key !== null ? await deps.handoffs.findByIdempotencyKey(sender.id, key) : null;
    if (!winner) throw new Error('idempotency conflict without a winner');
    return replay(winner);
  }
  if (recipient.provider !== 'manual' && inserted.deliveryState === 'WAITING') {
    try {
      await deps.scheduler.enqueue({ agentId: recipient.id, provider: recipient.provider, cause: 'sent', handoffId: inserted.id }, JOB_IDS.sent(inserted.id));
    } catch (err) {
      // Recorded is what matters; the reconciler queues it from Postgres when Redis is back.
      deps.logger.warn({ err, handoffId: inserted.id }, 'enqueue after commit failed; the reconciler will queue it');
    }
  }
  deps.logger.debug({ handoffId: inserted.id, from, to }, 'handoff enrolled');
  return { handoff: view(inserted), created: true };
}
