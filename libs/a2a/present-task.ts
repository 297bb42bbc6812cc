import { Role, TaskState, type Artifact, type Message, type Part, type Task } from '@a2a-js/sdk';
import { a2aTaskRule, type A2aTaskState } from '../domain/a2a-task-states.ts';
import { assertNever } from '../domain/errors.ts';
import type { HandoffView } from '../db/records.ts';

function protocolState(state: A2aTaskState): TaskState {
  switch (state) {
    case 'submitted':
      return TaskState.TASK_STATE_SUBMITTED;
    case 'working':
      return TaskState.TASK_STATE_WORKING;
    case 'input-required':
      return TaskState.TASK_STATE_INPUT_REQUIRED;
    case 'completed':
      return TaskState.TASK_STATE_COMPLETED;
    case 'failed':
      return TaskState.TASK_STATE_FAILED;
    case 'canceled':
      return TaskState.TASK_STATE_CANCELED;
    case 'rejected':
      return TaskState.TASK_STATE_REJECTED;
    default:
      return assertNever(state, 'A2A task state');
  }
}

export function textPart(text: string): Part {
  return { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' };
}

function message(role: Role, messageId: string, text: string, contextId: string, taskId: string): Message {
  return { messageId, contextId, taskId, role, parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [] };
}

/** The A2A context of a handoff: its Baton session, or the handoff itself when it has none. */
export function contextIdOf(h: Pick<HandoffView, 'id' | 'sessionId'>): string {
  return h.sessionId ?? h.id;
}

/**
 * A handoff as an A2A task: the task id is the handoff id, its state comes from the one table
 * (libs/domain/a2a-task-states.ts) with the rule's note (and the delivery's detail) as the
 * status message, the turn's result is the artifact `result`, and the history is the message sent.
 */
export function taskOf(h: HandoffView): Task {
  const rule = a2aTaskRule(h.deliveryState, h.workState);
  const contextId = contextIdOf(h);
  const note = h.deliveryDetail ? `${rule.note} (${h.deliveryDetail})` : rule.note;
  const artifacts: Artifact[] = [];
  if (h.resultSummary !== null || (h.result !== null && h.result !== undefined)) {
    const parts = [textPart(h.resultSummary ?? '')];
    if (h.result !== null && h.result !== undefined)
      parts.push({ ...textPart(''), content: { $case: 'data', value: h.result }, mediaType: 'application/json' });
    artifacts.push({ artifactId: 'result', name: 'result', description: "the turn's result", parts, metadata: undefined, extensions: [] });
  }
  return {
    id: h.id,
    contextId,
    status: {
      state: protocolState(rule.state),
      message: message(Role.ROLE_AGENT, `${h.id}.${h.revision}.${h.workRevision}`, note, contextId, h.id),
      timestamp: h.updatedAt.toISOString(),
    },
    artifacts,
    history: [message(Role.ROLE_USER, h.idempotencyKey ?? h.id, h.message, contextId, h.id)],
    metadata: { baton: { handoffId: h.id, deliveryState: h.deliveryState, workState: h.workState, revision: h.revision } },
  };
}
