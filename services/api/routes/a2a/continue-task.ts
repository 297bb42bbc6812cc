import type { Message, Task } from '@a2a-js/sdk';
import { a2aTaskRule } from '../../../../libs/domain/a2a-task-states.ts';
import { BatonError } from '../../../../libs/domain/errors.ts';
import { loadVisible } from '../../../../libs/handoffs/load-handoff.ts';
import { closeWork } from '../../../../libs/handoffs/work-contract.ts';
import { taskOf } from '../../../../libs/a2a/present-task.ts';
import type { A2aCall } from './a2a-call.ts';

/** Where a continuation's message id is kept: the close's event detail, so a repeat finds it. */
const MESSAGE_ID_KEY = 'a2aMessageId';

/**
 * A message continuing a task (SendMessage with `taskId`): the sender's answer to work returned
 * for review, through the work contract's close (closeWork). The task must be `input-required`
 * (its work returned): the message's text becomes the revision note, and the same handoff goes
 * back to the agent for a new turn; with `metadata.baton.resolution = "accepted"` the work is
 * accepted instead and the task is `completed`. A task in any other state is refused with
 * task_not_continuable (A2A's unsupported operation: a finished task is never restarted, and
 * Baton adds nothing to a turn in progress). The message id is the idempotency key as for a
 * new message: a repeat (kept on the close's event) answers with the task as it now is.
 * @throws BatonError handoff_not_found, not_sender, task_not_continuable, stale_revision
 */
export async function continueTask(call: A2aCall, m: Message, text: string): Promise<Task> {
  const h = await loadVisible(call.core, call.project, m.taskId, call.viewer);
  if (h.recipientId !== call.agent.id)
    throw new BatonError('handoff_not_found', `no handoff ${JSON.stringify(m.taskId)} in project ${call.project}`);
  if (m.contextId !== '' && m.contextId !== (h.sessionId ?? h.id))
    throw new BatonError('validation_failed', `params/message/contextId is not the context of task ${h.id}`);
  const events = await call.core.handoffs.events(h.id);
  const repeated = events.some((e) => (e.detail as Record<string, unknown> | null)?.[MESSAGE_ID_KEY] === m.messageId);
  if (repeated) return taskOf(h);
  const state = a2aTaskRule(h.deliveryState, h.workState).state;
  if (state !== 'input-required')
    throw new BatonError(
      'task_not_continuable',
      `task ${h.id} is ${state}: only an input-required task takes a message continuing it; send a new message instead`,
    );
  if (call.sender === null) throw new BatonError('not_sender', 'an admin token answers as an agent: name it with the X-Baton-Agent header');
  const resolution = (m.metadata?.['baton'] as { resolution?: unknown } | undefined)?.resolution === 'accepted' ? 'accepted' : 'revision';
  const after = await closeWork(call.core, {
    project: call.project,
    id: h.id,
    as: call.sender,
    resolution,
    note: text,
    revision: h.workRevision,
    tokenId: call.tokenId,
    detail: { [MESSAGE_ID_KEY]: m.messageId },
  });
  return taskOf(after);
}
