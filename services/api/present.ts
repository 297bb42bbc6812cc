import type { AgentRecord, AttemptRecord, EventRecord, HandoffView } from '../../libs/db/records.ts';

/** What callers see of Baton's records. Internal ids (agent uuids, project ids) stay inside. */

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function presentAgent(a: AgentRecord) {
  return {
    id: a.handle,
    displayName: a.displayName,
    provider: a.provider,
    settings: a.providerSettings,
    target: a.deliveryTarget,
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
    title: h.title,
    message: h.message,
    focus: h.focus,
    doneWhen: h.doneWhen,
    context: { summary: h.contextSummary, openQuestions: h.openQuestions, nextSteps: h.nextSteps },
    dueAt: iso(h.dueAt),
    idempotencyKey: h.idempotencyKey,
    state: h.deliveryState,
    deliveryState: h.deliveryState,
    detail: h.deliveryDetail,
    revision: h.revision,
    attemptCount: h.attemptCount,
    duplicateOf: h.duplicateOfId,
    result: h.resultSummary !== null || (h.result !== null && h.result !== undefined) ? { summary: h.resultSummary, output: h.result ?? null } : null,
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
    event: e.event,
    actor: { kind: e.actorKind, id: e.actorId },
    reason: e.reason,
    detail: e.detail ?? null,
    revision: e.revision,
    at: e.createdAt.toISOString(),
  };
}
