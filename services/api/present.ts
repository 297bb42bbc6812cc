import type { AgentRecord, AttemptRecord, EventRecord, HandoffView, NotificationRecord } from '../../libs/db/records.ts';
import type { RuntimeSettings } from '../../libs/domain/runtime-settings.ts';
import { redactProviderSettings } from '../../libs/adapters/provider-specs.ts';
import type { ConnectionRecord } from '../../libs/db/settings-repository.ts';
import { poolName } from '../../libs/domain/ids.ts';

/** What callers see of Baton's records. Internal ids (agent uuids, project ids) stay inside. */

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function presentAgent(a: AgentRecord) {
  return {
    id: a.handle,
    displayName: a.displayName,
    provider: a.provider,
    // Secrets (a webhook secret, an env value marked secret) are never shown.
    settings: redactProviderSettings(a.provider, a.providerSettings),
    target: a.deliveryTarget,
    pool: poolName(a.pool),
    deployment: a.deployment,
    roles: a.roles,
    generation: a.generation,
    createdAt: a.createdAt.toISOString(),
    updatedAt: a.updatedAt.toISOString(),
  };
}

export function presentHandoff(h: HandoffView) {
  return {
    id: h.id,
    seq: h.seq.toString(),
    from: h.senderHandle,
    to: h.recipientHandle,
    toRole: h.recipientRole,
    routedAt: iso(h.routedAt),
    title: h.title,
    message: h.message,
    focus: h.focus,
    doneWhen: h.doneWhen,
    context: { summary: h.contextSummary, openQuestions: h.openQuestions, nextSteps: h.nextSteps },
    dueAt: iso(h.dueAt),
    reminderSentAt: iso(h.reminderSentAt),
    idempotencyKey: h.idempotencyKey,
    state: h.deliveryState,
    deliveryState: h.deliveryState,
    workState: h.workState,
    work:
      h.workState === null
        ? null
        : {
            state: h.workState,
            attempt: h.workAttempt,
            revision: h.workRevision,
            claimedBy: h.claimedByHandle ?? null,
            leaseExpiresAt: iso(h.leaseExpiresAt),
            returnOutcome: h.returnOutcome,
            resolution: h.workResolution,
            note: h.closeNote,
            resultFactIds: h.resultFactIds ?? [],
            returnedAt: iso(h.returnedAt),
          },
    sessionId: h.sessionId,
    detail: h.deliveryDetail,
    revision: h.revision,
    attemptCount: h.attemptCount,
    duplicateOf: h.duplicateOfId,
    result:
      h.resultSummary !== null || (h.result !== null && h.result !== undefined)
        ? { summary: h.resultSummary, output: h.result ?? null }
        : null,
    createdAt: h.createdAt.toISOString(),
    updatedAt: h.updatedAt.toISOString(),
    settledAt: iso(h.settledAt),
  };
}

export function presentAttempt(a: AttemptRecord) {
  return {
    number: a.number,
    requestId: a.requestId,
    status: a.status,
    workerId: a.workerId,
    error: a.error,
    startedAt: a.startedAt.toISOString(),
    acceptedAt: iso(a.acceptedAt),
    finishedAt: iso(a.finishedAt),
  };
}

export function presentEvent(e: EventRecord) {
  return {
    seq: e.id.toString(),
    from: e.fromState,
    to: e.toState,
    workFrom: e.workFromState ?? null,
    workTo: e.workToState ?? null,
    event: e.event,
    actor: { kind: e.actorKind, id: e.actorId, tokenId: e.tokenId },
    reason: e.reason,
    detail: e.detail ?? null,
    revision: e.revision,
    at: e.createdAt.toISOString(),
  };
}

export function presentNotification(n: NotificationRecord) {
  return { id: n.id, handoffId: n.handoffId, kind: n.kind, text: n.text, createdAt: n.createdAt.toISOString(), readAt: iso(n.readAt) };
}

export function presentSettings(s: RuntimeSettings) {
  return { enabled: s.enabled, enabledAfter: iso(s.enabledAfter), connections: s.connections, outageGuard: s.outageGuard };
}

export function presentConnection(c: ConnectionRecord) {
  return { from: c.fromHandle, to: c.toHandle, rule: c.rule, updatedAt: c.updatedAt.toISOString() };
}
