import { createHash } from 'node:crypto';
import { BatonError, hasErrorCode } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import { planTransition } from '../domain/transitions.ts';
import { INITIAL_WORK_STATE, workMoveWhenDeliverySettles } from '../domain/work-states.ts';
import type { HandoffRecord, HandoffView } from '../db/records.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { SYSTEM_ACTOR, type Actor, type CoreDeps, type TransitionDeps } from './ports.ts';
import { applyTransition } from './apply-transition.ts';
import { connectionHold, settingsFrom } from '../domain/runtime-settings.ts';
import { routeOf } from '../queue/dispatch-job.ts';
import { checkRoles } from '../domain/agent-roles.ts';
import type { RoleMember } from '../db/handoff-sql/enroll.ts';

/** `to` value that addresses the project: unowned work any of its agents may claim. */
export const TO_PROJECT = '@project';

/** How a `to` value names a role: `@role:reviewer` (routed to one capable agent at dispatch time: route-by-role.ts). */
export const TO_ROLE_PREFIX = '@role:';

/**
 * The role a `to` value addresses (`@role:<name>`, checked and lower-cased), or null when it names
 * an agent or the project.
 * @throws BatonError invalid_role
 */
export function roleOf(to: string | null): string | null {
  if (to === null || !to.toLowerCase().startsWith(TO_ROLE_PREFIX)) return null;
  const [role] = checkRoles([to.slice(TO_ROLE_PREFIX.length)]);
  if (role === undefined) throw new BatonError('invalid_role', `${JSON.stringify(to)} names no role`);
  return role;
}

export interface SendHandoffInput {
  project: string;
  from: string;
  /** An agent id, TO_PROJECT (or null) for unowned work, or `@role:<name>` for one agent of that role. */
  to: string | null;
  sessionId?: string | null | undefined;
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

/**
 * What a send touches: the enrolment statement and its look-ups (`handoffs`), the hold on a
 * blocked connection (a move), and the wake-up after the commit for a recipient of this
 * deployment.
 */
export type SendDeps = TransitionDeps & Pick<CoreDeps, 'deployment' | 'scheduler' | 'logger'>;

/** sha256 of the content (who and to whom are added by the in-progress key). */
export function contentHash(input: SendHandoffInput): string {
  const c = input.context ?? {};
  return createHash('sha256')
    .update(
      JSON.stringify([
        input.title ?? null,
        input.message,
        input.focus ?? null,
        input.doneWhen ?? null,
        c.summary ?? null,
        c.openQuestions ?? [],
        c.nextSteps ?? [],
      ]),
    )
    .digest('hex');
}

/**
 * Records a handoff and queues it for its recipient, in one statement (project and agents are
 * resolved inside it). The recipient's session at this moment is snapshotted: the handoff is
 * delivered there or nowhere. The dispatch job is added after the commit with a deterministic
 * id, so a lost enqueue is repaired by the reconciler and a repeated one is a no-op.
 * - With an idempotency key the sender already used: the first handoff is returned (same id,
 *   no new delivery), also when two such sends race; with different content it is a conflict.
 * - Without a key, identical to a handoff still in progress (same sender, recipient and
 *   content): recorded as DUPLICATE of it and not delivered, also when two such sends race.
 * @throws BatonError project_not_found, unknown_sender, unknown_recipient, invalid_role, no_agent_with_role, idempotency_conflict, database_unavailable
 */
export async function sendHandoff(deps: SendDeps, input: SendHandoffInput): Promise<SendHandoffResult> {
  const from = input.from.toLowerCase();
  const role = roleOf(input.to);
  const to = input.to === null || input.to === TO_PROJECT || role !== null ? null : input.to.toLowerCase();
  const project = input.project.toLowerCase();
  const key = input.idempotencyKey ?? null;
  const hash = contentHash(input);
  const actor: Actor = { kind: 'sender', id: from, tokenId: input.tokenId ?? null };
  const view = (h: HandoffRecord): HandoffView => ({ ...h, senderHandle: from, recipientHandle: to });
  const enroll = (duplicateOf: HandoffRecord | null) => {
    const event = duplicateOf ? 'duplicate_detected' : 'enrolled';
    const now = deps.clock.now();
    const enrolled = deps.handoffs.enroll(
      {
        id: newId(now.getTime()),
        projectSlug: project,
        fromHandle: from,
        toHandle: to,
        toRole: role,
        sessionId: input.sessionId ?? null,
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
        guardDuplicates: key === null && !duplicateOf,
        duplicateOfId: duplicateOf?.id ?? null,
        deliveryState: planTransition(null, event, actor.kind),
        deliveryDetail: duplicateOf
          ? `same content as ${duplicateOf.id}, which is still ${duplicateOf.deliveryState}; not delivered`
          : role !== null
            ? `waiting for an agent with role ${role}`
            : null,
        // Work (a title, or anything addressed to the project) is returned and closed; a plain
        // message to an agent is only delivered (and may be acknowledged).
        // A duplicate is not delivered, so its work starts settled (the original carries it).
        workState:
          input.title || (to === null && role === null)
            ? duplicateOf
              ? (workMoveWhenDeliverySettles('DUPLICATE')?.to ?? INITIAL_WORK_STATE)
              : INITIAL_WORK_STATE
            : null,
        createdAt: now,
        // A recipient in the middle of a turn: the new handoff waits, visibly, as BUSY.
        ...(duplicateOf
          ? {}
          : {
              busyIfLive: {
                to: planTransition('WAITING', 'recipient_busy', 'system'),
                event: { event: 'recipient_busy', actorKind: 'system' as const, actorId: null, reason: 'the recipient is in a turn' },
              },
            }),
      },
      {
        event,
        actorKind: actor.kind,
        actorId: actor.id,
        tokenId: actor.tokenId ?? null,
        ...(duplicateOf ? { reason: `duplicate of ${duplicateOf.id}`, detail: { duplicateOf: duplicateOf.id } } : {}),
      },
    );
    // After the commit: the followers of GET /v1/events learn of the new handoff.
    return enrolled.then((o) => {
      deps.events.published(o.eventIds);
      return o;
    });
  };

  // Three tries cover the one race that needs a retry: the original settling between our
  // conflict and our look-up of it.
  for (let attempt = 0; attempt < 3; attempt++) {
    const o = await enroll(null);
    if (!o.projectId) throw new BatonError('project_not_found', `project ${JSON.stringify(project)} does not exist`);
    if (!o.senderId) throw new BatonError('unknown_sender', `no agent ${JSON.stringify(from)} in project ${project}`);
    if (to !== null && !o.recipientId) throw new BatonError('unknown_recipient', `no agent ${JSON.stringify(to)} in project ${project}`);
    if (role !== null && o.roleMembers?.length === 0) {
      throw new BatonError(
        'no_agent_with_role',
        `no active agent of project ${project} but ${from} declares the role ${JSON.stringify(role)}`,
        {
          role,
        },
      );
    }
    if (!o.sessionFound) throw new BatonError('session_not_found', `no session ${JSON.stringify(input.sessionId)} in project ${project}`);
    if (o.handoff) {
      // Who may send to whom is checked on send: a blocked (or, in a restricted project, not
      // allowed) connection holds the handoff at once, spending no attempt; lifting the block
      // releases it (the reconciler's liftHolds).
      const policy = settingsFrom(o.connectionsSetting == null ? [] : [{ key: 'connections', value: o.connectionsSetting }]).connections;
      const hold = to !== null && o.handoff.deliveryState !== 'DUPLICATE' ? connectionHold(policy, o.connectionRule) : null;
      if (hold !== null) return { handoff: view(await holdOnSend(deps, o.handoff, hold)), created: true };
      // Recorded is what the sender is told; the wake-up goes to Redis without holding the
      // answer back (a lost one is re-queued from Postgres by the reconciler).
      if (role !== null) void wakeIdleMembers(deps, o.handoff, o.roleMembers ?? []);
      else void queueAfterCommit(deps, o.handoff, o.recipientDeployment);
      return { handoff: view(o.handoff), created: true };
    }
    if (key !== null) {
      const existing = await deps.handoffs.findByIdempotencyKey(o.senderId, key);
      if (!existing) continue;
      // A role handoff may be bound since: its role, not its recipient, is what was sent to.
      const sameTo =
        role !== null
          ? existing.recipientRole === role
          : existing.recipientRole === null && existing.recipientId === (o.recipientId ?? null);
      if (existing.contentHash !== hash || !sameTo) {
        throw new BatonError(
          'idempotency_conflict',
          `idempotency key ${JSON.stringify(key)} was already used by ${from} for handoff ${existing.id} with different content`,
          {
            handoffId: existing.id,
          },
        );
      }
      return { handoff: view(existing), created: false };
    }
    const original = o.inProgressKey ? await deps.handoffs.findByInProgressKey(o.inProgressKey) : null;
    if (!original) continue;
    const dup = await enroll(original);
    if (dup.handoff) return { handoff: view(dup.handoff), created: true };
  }
  throw new Error(`could not enroll the handoff from ${from} to ${to} after 3 tries`);
}

/**
 * Holds a handoff just recorded over a blocked connection. This is a second statement, so a
 * writer may move the new handoff first: the worker (a reservation queues it BUSY behind a
 * turn, or it meets it as the head and holds it itself, before any write), the removal of its
 * recipient, or, once the block is lifted, its delivery. The send recorded it all the same and
 * answers 201 with the handoff as it then stands, never with that writer's `stale_revision`
 * (a 4xx says the call changed nothing). Nothing is delivered unheld over a block meanwhile:
 * every delivery checks the holds before it writes (deliver-turn.ts).
 */
async function holdOnSend(deps: TransitionDeps, h: HandoffRecord, hold: string): Promise<HandoffRecord> {
  try {
    const moved = await applyTransition(deps, h, 'held', SYSTEM_ACTOR, { reason: hold, patch: { deliveryDetail: hold } });
    return { ...h, deliveryState: moved.deliveryState, revision: moved.revision, deliveryDetail: hold };
  } catch (err) {
    if (!hasErrorCode(err, 'stale_revision')) throw err;
    return (await deps.handoffs.findById(h.id)) ?? h;
  }
}

/**
 * After a send to a role: wakes every idle push member of this deployment, whose dispatch run,
 * finding its own queue empty, binds the handoff (route-by-role.ts); the first to ask wins it.
 * Busy members bind when their queues empty, pull members through the reconciler, and a lost
 * wake-up is made good by the reconciler's `routes` step.
 */
async function wakeIdleMembers(
  deps: Pick<CoreDeps, 'deployment' | 'scheduler' | 'logger'>,
  h: HandoffRecord,
  members: RoleMember[],
): Promise<void> {
  if (h.deliveryState !== 'WAITING') return;
  const idle = members.filter((m) => m.idle && m.provider !== 'manual' && m.deployment === deps.deployment);
  try {
    await Promise.all(
      idle.map((m) =>
        deps.scheduler.enqueue(
          { ...routeOf({ recipientId: m.id, provider: m.provider, pool: m.pool }), cause: 'sent', handoffId: h.id },
          JOB_IDS.sent(h.id),
        ),
      ),
    );
  } catch (err) {
    deps.logger.warn({ err, handoffId: h.id }, 'enqueue after commit failed; the reconciler will route it');
  }
}

/**
 * The wake-up for a handoff just committed, WAITING or BUSY (enrolled behind a turn in flight):
 * a BUSY one needs it as much, since that turn may have looked at the queue for the last time
 * before this commit. For a BUSY one the API's queues add no wake-up while the recipient's turn
 * lock is held and leave its holder a pending wake-up instead (DeliveryQueues `heldLocks`); a
 * WAITING one is woken without asking (its recipient had no turn in flight).
 */
async function queueAfterCommit(
  deps: Pick<CoreDeps, 'deployment' | 'scheduler' | 'logger'>,
  h: HandoffRecord,
  recipientDeployment: string | null,
): Promise<void> {
  if (!h.recipientId || !h.provider || h.provider === 'manual' || (h.deliveryState !== 'WAITING' && h.deliveryState !== 'BUSY')) return;
  if (recipientDeployment !== deps.deployment) {
    // Another deployment owns the recipient: its reconciler's sweep finds the handoff in
    // Postgres and its workers deliver it. Our queues would only wake workers that may not.
    deps.logger.debug(
      { handoffId: h.id, deployment: recipientDeployment },
      'recipient belongs to another deployment; its sweep delivers it',
    );
    return;
  }
  try {
    await deps.scheduler.enqueue(
      {
        ...routeOf({ recipientId: h.recipientId, provider: h.provider, pool: h.pool }),
        cause: h.deliveryState === 'BUSY' ? 'sent_behind_turn' : 'sent',
        handoffId: h.id,
      },
      JOB_IDS.sent(h.id),
    );
  } catch (err) {
    // Recorded is what matters; the reconciler queues it from Postgres when Redis is back.
    deps.logger.warn({ err, handoffId: h.id }, 'enqueue after commit failed; the reconciler will queue it');
  }
}
