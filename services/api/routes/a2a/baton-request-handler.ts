import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import type {
  AgentCard,
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  SendMessageRequest,
  StreamResponse,
  Task,
  TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import { BatonError } from '../../../../libs/domain/errors.ts';
import { isUuid } from '../../../../libs/domain/ids.ts';
import { LIMITS } from '../../../../libs/domain/limits.ts';
import { loadVisible } from '../../../../libs/handoffs/load-handoff.ts';
import { sendHandoff } from '../../../../libs/handoffs/send-handoff.ts';
import { cancelHandoff } from '../../../../libs/handoffs/work-contract.ts';
import { taskOf } from '../../../../libs/a2a/present-task.ts';
import type { A2aCall } from './a2a-call.ts';
import { continueTask } from './continue-task.ts';
import { listTasksOf } from './list-tasks.ts';
import { checkConfig, deleteConfig, getConfig, listConfigs, registerConfig } from './push-configs.ts';

const unsupported = (what: string) => new BatonError('protocol_method_unsupported', `${what} is not served by Baton's A2A gateway yet`);

/**
 * The A2A request handler of one call, over Baton's own use cases: a message is a handoff
 * (sendHandoff), a task is a handoff read as the caller may see it (loadVisible), a cancel is
 * the sender's cancel (cancelHandoff). It keeps nothing: Postgres is the task store.
 */
export class BatonRequestHandler implements A2ARequestHandler {
  constructor(private readonly call: A2aCall) {}

  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(this.call.card);
  }

  getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    return Promise.reject(unsupported('GetExtendedAgentCard'));
  }

  /**
   * A handoff from the caller's agent to this one, answered once it is recorded (the task is
   * then `submitted`, or further along for a repeated message id): follow it with GetTask.
   * The message id is the idempotency key; the context id, when given, is a Baton session of
   * the project. A push-notification config in `configuration` is registered on the task (its
   * every transition, for a new task; the same config id again keeps the one there).
   * @throws BatonError validation_failed, identity_mismatch, session_not_found, idempotency_conflict (and sendHandoff's),
   *   subscription_url_refused, too_many_push_configs
   */
  async sendMessage(params: SendMessageRequest, context?: ServerCallContext): Promise<Task> {
    const push = params.configuration?.taskPushNotificationConfig;
    if (push) checkConfig(this.call, push);
    const task = await this.send(params);
    // The message id names the config when the client gave none: a repeated message registers it once.
    if (push)
      await registerConfig(
        this.call,
        task.id,
        { ...push, id: push.id || `message:${params.message!.messageId}` },
        context,
        params.message!.taskId === '',
      );
    return task;
  }

  private async send(params: SendMessageRequest): Promise<Task> {
    const m = params.message;
    if (!m) throw new BatonError('validation_failed', 'params/message is required');
    if (this.call.sender === null)
      throw new BatonError('validation_failed', 'an admin token sends as an agent: name it with the X-Baton-Agent header');
    if (m.messageId === '' || m.messageId.length > LIMITS.idempotencyKey)
      throw new BatonError('validation_failed', `params/message/messageId must be 1 to ${LIMITS.idempotencyKey} characters`);
    const texts: string[] = [];
    for (const p of m.parts) {
      if (p.content?.$case !== 'text') throw new BatonError('validation_failed', 'params/message/parts: only text parts are taken');
      texts.push(p.content.value);
    }
    const text = texts.join('\n');
    if (text.trim() === '') throw new BatonError('validation_failed', 'params/message has no text');
    if (text.length > LIMITS.message) throw new BatonError('field_too_long', `the message must be at most ${LIMITS.message} characters`);
    if (m.taskId !== '') return continueTask(this.call, m, text);
    if (m.contextId !== '' && !isUuid(m.contextId))
      throw new BatonError('session_not_found', `no session ${JSON.stringify(m.contextId)} in project ${this.call.project}`);
    const { handoff } = await sendHandoff(this.call.core, {
      project: this.call.project,
      from: this.call.sender,
      tokenId: this.call.tokenId,
      to: this.call.agent.handle,
      sessionId: m.contextId === '' ? null : m.contextId,
      message: text,
      idempotencyKey: m.messageId,
    });
    return taskOf(handoff);
  }

  // eslint-disable-next-line require-yield -- refused before anything is streamed
  async *sendMessageStream(): AsyncGenerator<StreamResponse, void, undefined> {
    await Promise.resolve();
    throw unsupported('SendStreamingMessage');
  }

  /** @throws BatonError handoff_not_found (also for one the caller may not see, or one to another agent) */
  async getTask(params: GetTaskRequest): Promise<Task> {
    const h = await loadVisible(this.call.core, this.call.project, params.id, this.call.viewer);
    if (h.recipientId !== this.call.agent.id)
      throw new BatonError('handoff_not_found', `no handoff ${JSON.stringify(params.id)} in project ${this.call.project}`);
    return taskOf(h);
  }

  /** The caller's visible tasks of this agent (list-tasks.ts). @throws BatonError validation_failed, invalid_cursor */
  listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    return listTasksOf(this.call, params);
  }

  /** The sender's cancel. @throws BatonError handoff_not_found, not_sender, invalid_transition */
  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    await this.getTask({ tenant: '', id: params.id });
    if (this.call.sender === null)
      throw new BatonError('not_sender', 'an admin token cancels as an agent: name it with the X-Baton-Agent header');
    const h = await cancelHandoff(this.call.core, {
      project: this.call.project,
      id: params.id,
      as: this.call.sender,
      tokenId: this.call.tokenId,
    });
    return taskOf(h);
  }

  /**
   * A push-notification config on a task the caller may read: its later transitions are POSTed
   * (push-configs.ts). @throws BatonError handoff_not_found, subscription_url_refused, field_too_long, too_many_push_configs
   */
  async createTaskPushNotificationConfig(p: TaskPushNotificationConfig, context?: ServerCallContext): Promise<TaskPushNotificationConfig> {
    await this.getTask({ tenant: '', id: p.taskId });
    return registerConfig(this.call, p.taskId, p, context, false);
  }

  /** @throws BatonError handoff_not_found, push_config_not_found */
  async getTaskPushNotificationConfig(p: GetTaskPushNotificationConfigRequest): Promise<TaskPushNotificationConfig> {
    await this.getTask({ tenant: '', id: p.taskId });
    return getConfig(this.call, p);
  }

  /** @throws BatonError handoff_not_found */
  async listTaskPushNotificationConfigs(p: ListTaskPushNotificationConfigsRequest): Promise<ListTaskPushNotificationConfigsResponse> {
    await this.getTask({ tenant: '', id: p.taskId });
    return listConfigs(this.call, p);
  }

  /** @throws BatonError handoff_not_found, push_config_not_found */
  async deleteTaskPushNotificationConfig(p: DeleteTaskPushNotificationConfigRequest): Promise<void> {
    await this.getTask({ tenant: '', id: p.taskId });
    await deleteConfig(this.call, p);
  }

  // eslint-disable-next-line require-yield -- refused before anything is streamed
  async *resubscribe(): AsyncGenerator<StreamResponse, void, undefined> {
    await Promise.resolve();
    throw unsupported('SubscribeToTask');
  }
}
