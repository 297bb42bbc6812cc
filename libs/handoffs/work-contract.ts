import { createHash, randomUUID } from 'node:crypto';
import { BatonError, hasErrorCode } from '../domain/errors.ts';
import type { ContextPacket } from '../domain/context-packet.ts';
import { isUuid } from '../domain/ids.ts';
import { LIMITS } from '../domain/limits.ts';
import type { AgentRecord, HandoffView } from '../db/records.ts';
import { isDatabaseUnavailable } from '../db/classify-error.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import { applyWorkTransition, type WorkMoveDeps } from './apply-work-transition.ts';
import { applyTransition } from './apply-transition.ts';
import { contextPacketFor } from './manage-sessions.ts';
import type { CoreDeps, TransitionDeps } from './ports.ts';
import { loadAsAgent, reread, type LoadDeps, type RereadDeps } from './load-handoff.ts';
import { wakeRecipient, type WakeDeps } from './wake-recipient.ts';

/** What moving the work as an agent touches: the load, the work move, the read-back. */
type WorkActDeps = LoadDeps & WorkMoveDeps;

/** An accept: a work move, and the context packet (the handoff's session and its facts). */
export type AcceptDeps = WorkActDeps & Pick<CoreDeps, 'sessions'>;

/** A heartbeat: the load, and the lease's own statement (`work.heartbeat`). */
export type HeartbeatDeps = LoadDeps & Pick<CoreDeps, 'work' | 'clock'>;

/** A return: a work move, the remembered return (`work.remembered`), the cited facts (`sessions`). */
export type ReturnDeps = WorkActDeps & Pick<CoreDeps, 'work' | 'sessions'>;

/** A close: a work move, and for a revision the recipient's wake-up. */
export type CloseDeps = WorkActDeps & WakeDeps;

/** A cancel: a work move, or a delivery move for a plain message. */
export type CancelDeps = WorkActDeps & TransitionDeps;

/** How long a claim lives without a heartbeat: the caller's lease (default and bounds in LIMITS), at least 1 s. */
function leaseOf(leaseMs: number | undefined): number {
  return Math.min(LIMITS.leaseSecondsMax * 1000, Math.max(1_000, leaseMs ?? LIMITS.leaseSecondsDefault * 1000));
}

/** A pull claim moves the delivery too (no turn will be written for it); a push turn does not. */
function pulled(h: HandoffView): boolean {
  return h.attemptCount === 0 && (h.deliveryState === 'ACCEPTED' || h.deliveryState === 'WAITING' || h.deliveryState === 'BUSY');
}

/** The action a return is remembered under (`work_requests.action`). */
const RETURN = 'return';

const hashBody = (body: unknown) => createHash('sha256').update(JSON.stringify(body)).digest('hex');

export interface Claim {
  handoff: HandoffView;
  claimToken: string;
  attempt: number;
  leaseExpiresAt: Date;
  packet: ContextPacket;
  /** true: this agent already held the claim; the same claim is returned (a replayed accept). */
  recovered: boolean;
}

/**
 * Claims work, exactly once: one conditional update (work state, scope and recipient checked
 * in the same statement) gives one caller a claim token and an attempt number, and everyone
 * else `already_claimed`. The recipient claims owned work; any agent of the project claims
 * unowned work. The claim holds a lease that `heartbeat` renews.
 * @throws BatonError handoff_not_found, agent_not_found, not_work, not_recipient, handoff_held, already_claimed, invalid_transition
 */
export async function acceptHandoff(
  deps: AcceptDeps,
  input: { project: string; id: string; as: string; leaseMs?: number | undefined; tokenId?: string | null },
): Promise<Claim> {
  const { h, agent } = await loadAsAgent(deps, input);
  if (h.workState === null) throw new BatonError('not_work', `handoff ${h.id} is a plain message: read it, or acknowledge it`);
  if (h.recipientId !== null && h.recipientId !== agent.id)
    throw new BatonError('not_recipient', `${agent.handle} is not the recipient of handoff ${h.id}`);
  if (h.recipientId === null && h.recipientRole !== null) {
    throw new BatonError('not_recipient', `handoff ${h.id} was sent to the role ${h.recipientRole} and is not bound to an agent yet`);
  }
  if (h.deliveryState === 'DUPLICATE') {
    throw new BatonError(
      'invalid_transition',
      `handoff ${h.id} is a duplicate of ${h.duplicateOfId ?? 'a handoff still in progress'} (the same work sent again while that one was open): accept ${h.duplicateOfId ?? 'the original'} instead`,
      { from: h.workState, event: 'claimed' },
    );
  }
  if (h.deliveryState === 'HELD')
    throw new BatonError('handoff_held', `handoff ${h.id} is held: ${h.deliveryDetail ?? 'a deliberate block'}`);
  const leaseMs = leaseOf(input.leaseMs);
  const now = deps.clock.now();
  const held = await heldClaim(deps, h, agent.id, now);
  if (held) return held;
  if (h.workState === 'claimed' || h.workState === 'returned') {
    throw new BatonError(
      'already_claimed',
      `handoff ${h.id} is already ${h.workState === 'claimed' ? 'claimed' : 'returned'} by ${h.claimedByHandle ?? 'another agent'}`,
    );
  }
  const token = randomUUID();
  const leaseExpiresAt = new Date(now.getTime() + leaseMs);
  try {
    await applyWorkTransition(
      deps,
      h,
      'claimed',
      { role: 'recipient', handle: agent.handle, tokenId: input.tokenId ?? null },
      {
        reason: `claimed by ${agent.handle}`,
        patch: { claimToken: token, claimedById: agent.id, leaseExpiresAt },
        newAttempt: true,
        ...(pulled(h) && h.deliveryState !== 'ACCEPTED' ? { delivery: 'claimed' as const } : {}),
      },
    );
  } catch (err) {
    // Postgres away (or this reply lost): the claim may have committed; a retry finds it held
    // by this agent and answers it. No read-back here, so the 503 still comes within the bound.
    if (isDatabaseUnavailable(err)) throw err;
    // Lost the race: whoever won holds it now. That may be this agent, by an earlier call of
    // this accept whose answer it has not seen yet: answered as a replay, like a later retry.
    const now2 = await reread(deps, h);
    const replay = await heldClaim(deps, now2, agent.id, deps.clock.now());
    if (replay) return replay;
    if (now2.workState === 'claimed' && now2.claimedById !== agent.id) {
      throw new BatonError('already_claimed', `handoff ${h.id} is already claimed by ${now2.claimedByHandle ?? 'another agent'}`);
    }
    throw err;
  }
  const claimed = await reread(deps, h);
  const packet = await contextPacketFor(deps, claimed, claimed.senderHandle);
  return { handoff: claimed, claimToken: token, attempt: claimed.workAttempt, leaseExpiresAt, packet, recovered: false };
}

/** The live claim `agentId` already holds on the work, as a replayed accept answers it (`recovered`). */
async function heldClaim(deps: Pick<CoreDeps, 'sessions'>, h: HandoffView, agentId: string, now: Date): Promise<Claim | null> {
  if (!(h.workState === 'claimed' && h.claimedById === agentId && h.claimToken && h.leaseExpiresAt && h.leaseExpiresAt > now)) return null;
  const packet = await contextPacketFor(deps, h, h.senderHandle);
  return { handoff: h, claimToken: h.claimToken, attempt: h.workAttempt, leaseExpiresAt: h.leaseExpiresAt, packet, recovered: true };
}

/**
 * Renews a claim's lease. A claim whose lease already ran out cannot be renewed: the work went
 * back to the inbox (or to a new claimant) and the old token is fenced out.
 * @throws BatonError claim_lost, handoff_not_found, agent_not_found
 */
export async function heartbeat(
  deps: HeartbeatDeps,
  input: { project: string; id: string; as: string; claimToken: string; leaseMs?: number | undefined; tokenId?: string | null },
): Promise<{ leaseExpiresAt: Date }> {
  const { h, agent } = await loadAsAgent(deps, input);
  const now = deps.clock.now();
  const until = new Date(now.getTime() + leaseOf(input.leaseMs));
  if (h.claimedById !== agent.id || !(await deps.work.heartbeat(h.id, input.claimToken, now, until))) {
    throw new BatonError('claim_lost', `${agent.handle} holds no live claim on handoff ${h.id} with that token`);
  }
  return { leaseExpiresAt: until };
}

export interface ReturnInput {
  project: string;
  id: string;
  as: string;
  claimToken: string;
  /** The work revision the caller read; omitted, the current one is used. */
  revision?: number | undefined;
  summary: string;
  outcome: 'succeeded' | 'failed';
  facts?: string[] | undefined;
  tokenId?: string | null;
}

/**
 * Returns the result of claimed work (or, with outcome `failed`, gives the work back for a new
 * claim). Fail-closed evidence: every cited fact must belong to the handed-off session, be in
 * the same project, and have been written by the returning agent. Replaying the same return
 * (same claim token, same body) answers the same with `recovered: true`; the same claim with a
 * different body is a conflict. The return is remembered by the statement that moves the work,
 * so a replay finds it whenever the move committed: after a lost reply (the first call answered
 * 503), and when it races the first call (its own move refused, it reads the record back).
 * @throws BatonError claim_lost, stale_revision, invalid_evidence, replay_conflict, not_work
 */
export async function returnWork(deps: ReturnDeps, input: ReturnInput): Promise<{ handoff: HandoffView; recovered: boolean }> {
  const body = { summary: input.summary, outcome: input.outcome, facts: [...(input.facts ?? [])].sort() };
  const bodyHash = hashBody(body);
  const { h, agent } = await loadAsAgent(deps, input);
  const replay = await replayedReturn(deps, h, input.claimToken, bodyHash);
  if (replay) return replay;
  if (h.workState === null) throw new BatonError('not_work', `handoff ${h.id} is a plain message`);
  if (h.claimToken !== input.claimToken || h.claimedById !== agent.id || h.workState !== 'claimed') {
    throw new BatonError('claim_lost', `${agent.handle} holds no live claim on handoff ${h.id} with that token`);
  }
  if (h.leaseExpiresAt && h.leaseExpiresAt <= deps.clock.now())
    throw new BatonError('claim_lost', `the lease on handoff ${h.id} ran out; claim it again`);
  if (input.revision !== undefined && input.revision !== h.workRevision) {
    throw new BatonError('stale_revision', `handoff ${h.id} changed since work revision ${input.revision}; it is at ${h.workRevision}`, {
      expectedRevision: input.revision,
      currentRevision: h.workRevision,
    });
  }
  await checkEvidence(deps, h, agent, input.facts ?? []);
  const actor = { role: 'claimant' as const, handle: agent.handle, tokenId: input.tokenId ?? null };
  // The outcome column comes from the work table's rule for the event; the event row keeps the
  // whole result, so the timeline still has it after a new claim clears it from the handoff.
  const common = {
    reason: input.summary.slice(0, 200),
    detail: { outcome: input.outcome, summary: input.summary, facts: input.facts ?? [] },
    claimToken: input.claimToken,
    remember: { action: RETURN, bodyHash },
  };
  const result = { resultSummary: input.summary, resultFactIds: input.facts ?? [], claimToken: null, leaseExpiresAt: null };
  try {
    if (input.outcome === 'succeeded') {
      await applyWorkTransition(deps, h, 'returned', actor, {
        ...common,
        patch: result,
        ...(pulled(h) ? { delivery: 'work_returned' as const } : {}),
      });
    } else {
      await applyWorkTransition(deps, h, 'return_failed', actor, {
        ...common,
        patch: { ...result, claimedById: null },
        ...(pulled(h) ? { delivery: 'claim_released' as const } : {}),
      });
    }
  } catch (err) {
    // Refused: the claim moved since it was read. If an earlier call of this very return moved
    // it (this call is its retry, and raced it), answer as that call did.
    if (hasErrorCode(err, 'claim_lost') || hasErrorCode(err, 'stale_revision')) {
      const raced = await replayedReturn(deps, h, input.claimToken, bodyHash);
      if (raced) return raced;
    }
    throw err;
  }
  return { handoff: await reread(deps, h), recovered: false };
}

/** A return already made with this claim token: answered again (`recovered`), or a conflict if its body differs. */
async function replayedReturn(
  deps: Pick<CoreDeps, 'work'> & RereadDeps,
  h: HandoffView,
  claimToken: string,
  bodyHash: string,
): Promise<{ handoff: HandoffView; recovered: true } | null> {
  const seen = await deps.work.remembered(h.id, RETURN, claimToken);
  if (!seen) return null;
  if (seen.bodyHash !== bodyHash)
    throw new BatonError('replay_conflict', `handoff ${h.id} was already returned with this claim, with a different body`);
  return { handoff: await reread(deps, h), recovered: true };
}

async function checkEvidence(
  deps: Pick<CoreDeps, 'sessions'>,
  h: HandoffView,
  agent: AgentRecord,
  factIds: readonly string[],
): Promise<void> {
  if (factIds.length === 0) return;
  const bad = factIds.find((id) => !isUuid(id));
  if (bad) throw new BatonError('invalid_evidence', `${JSON.stringify(bad)} is not a fact id`);
  const facts = await deps.sessions.factsByIds(factIds);
  for (const id of factIds) {
    const f = facts.find((x) => x.id === id);
    if (!f) throw new BatonError('invalid_evidence', `fact ${id} does not exist`);
    if (!h.sessionId || f.sessionId !== h.sessionId)
      throw new BatonError('invalid_evidence', `fact ${id} is not from the session this handoff belongs to`);
    if (f.projectId !== h.projectId) throw new BatonError('invalid_evidence', `fact ${id} is from another project`);
    if (f.authorId !== agent.id)
      throw new BatonError('invalid_evidence', `fact ${id} was written by ${f.authorHandle}, not by ${agent.handle}`);
  }
}

/**
 * The sender closes returned work: `accepted` (closed), `revision` (back to the recipient with
 * a note: same handoff, a new attempt, and for a push recipient a new turn), or `blocked`.
 * @throws BatonError not_sender, not_work, invalid_transition, stale_revision
 */
export async function closeWork(
  deps: CloseDeps,
  input: {
    project: string;
    id: string;
    as: string;
    resolution: 'accepted' | 'revision' | 'blocked';
    note?: string | undefined;
    revision?: number | undefined;
    tokenId?: string | null;
    /** Kept on the close's event (the A2A gateway's message id of a continuation). */
    detail?: Record<string, unknown> | undefined;
  },
): Promise<HandoffView> {
  const { h, agent } = await loadAsAgent(deps, input);
  if (h.senderId !== agent.id) throw new BatonError('not_sender', `${agent.handle} is not the sender of handoff ${h.id}`);
  if (h.workState === null) throw new BatonError('not_work', `handoff ${h.id} is a plain message; there is nothing to close`);
  if (input.revision !== undefined && input.revision !== h.workRevision) {
    throw new BatonError('stale_revision', `handoff ${h.id} changed since work revision ${input.revision}; it is at ${h.workRevision}`);
  }
  const actor = { role: 'sender' as const, handle: agent.handle, tokenId: input.tokenId ?? null };
  const note = input.note ?? null;
  if (input.resolution === 'accepted') {
    await applyWorkTransition(deps, h, 'closed_accepted', actor, {
      reason: note,
      detail: input.detail,
      patch: { workResolution: 'accepted', closeNote: note },
    });
  } else if (input.resolution === 'blocked') {
    await applyWorkTransition(deps, h, 'closed_blocked', actor, {
      reason: note,
      patch: { workResolution: 'blocked', closeNote: note, claimToken: null, leaseExpiresAt: null },
    });
  } else {
    const redeliver = h.deliveryState === 'RETURNED';
    await applyWorkTransition(deps, h, 'revision_requested', actor, {
      reason: note,
      detail: input.detail,
      patch: { closeNote: note, claimToken: null, claimedById: h.recipientId === null ? null : h.claimedById, leaseExpiresAt: null },
      ...(redeliver ? { delivery: 'revision_requested' as const } : {}),
    });
    if (redeliver && h.recipientId && h.provider && h.provider !== 'manual') {
      const after = await reread(deps, h);
      await wakeRecipient(deps, h, JOB_IDS.released(h.id, after.revision));
    }
  }
  return reread(deps, h);
}

/**
 * The sender withdraws a handoff: open or claimed work becomes cancelled, and a delivery that
 * has not been written is cancelled (a turn already in the recipient's session is not undone).
 * @throws BatonError not_sender, invalid_transition
 */
export async function cancelHandoff(
  deps: CancelDeps,
  input: { project: string; id: string; as: string; tokenId?: string | null },
): Promise<HandoffView> {
  const { h, agent } = await loadAsAgent(deps, input);
  if (h.senderId !== agent.id) throw new BatonError('not_sender', `${agent.handle} is not the sender of handoff ${h.id}`);
  const deliveryCancellable =
    ['WAITING', 'BUSY', 'HELD', 'OWNER_REJECTED'].includes(h.deliveryState) || (h.deliveryState === 'ACCEPTED' && h.attemptCount === 0);
  const actorRef = { role: 'sender' as const, handle: agent.handle, tokenId: input.tokenId ?? null };
  if (h.workState !== null) {
    await applyWorkTransition(deps, h, 'cancelled', actorRef, {
      reason: `cancelled by ${agent.handle}`,
      patch: { claimToken: null, leaseExpiresAt: null },
      ...(deliveryCancellable ? { delivery: h.deliveryState === 'ACCEPTED' ? ('claim_cancelled' as const) : ('cancelled' as const) } : {}),
    });
  } else {
    await applyTransition(
      deps,
      h,
      'cancelled',
      { kind: 'sender', id: agent.handle, tokenId: input.tokenId ?? null },
      { reason: `cancelled by ${agent.handle}` },
    );
  }
  return reread(deps, h);
}
