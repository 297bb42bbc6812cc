import type {
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import type { ServerCallContext } from '@a2a-js/sdk/server';
import type { PushConfig, SubscriptionRecord } from '../../../../libs/db/subscription-repository.ts';
import {
  checkPushConfig,
  createPushConfig,
  findPushConfig,
  pushConfigsOf,
  removePushConfig,
  type SubscriptionOwner,
} from '../../../../libs/handoffs/manage-subscriptions.ts';
import { resolveProject } from '../../../../libs/handoffs/resolve-project.ts';
import type { A2aCall } from './a2a-call.ts';
import { A2A_PROTOCOL } from './protocol.ts';

/**
 * The A2A push-notification config methods over Baton's subscriptions: a config is a
 * subscription of kind a2a_push to its task's events (libs/handoffs/manage-subscriptions.ts),
 * owned by the caller's agent (an admin naming none: the project's admin), delivered by the
 * workers' subscription dispatcher with the body and headers A2A specifies
 * (libs/a2a/push-notification.ts). The caller must be able to read the task (GetTask) first.
 */

/** Who owns the configs a call registers and sees. */
function ownerOf(call: A2aCall): SubscriptionOwner {
  return call.viewer.agentId === null ? { admin: true } : { admin: false, agentId: call.viewer.agentId };
}

/** A config as A2A shows it: the client's credentials are never read back. */
export function configOf(s: SubscriptionRecord): TaskPushNotificationConfig {
  const push = s.push!;
  return {
    tenant: '',
    id: push.configId,
    taskId: s.handoffId ?? '',
    url: s.url,
    token: push.token,
    authentication: push.authentication === null ? undefined : { scheme: push.authentication.scheme, credentials: '[redacted]' },
  };
}

/** What of a config given over A2A Baton keeps, and the version it came over (the body's shape). */
export function pushConfigOf(c: TaskPushNotificationConfig, context: ServerCallContext | undefined): PushConfig {
  const auth = c.authentication;
  return {
    configId: c.id,
    token: c.token,
    authentication: auth && auth.scheme !== '' && auth.credentials !== '' ? { scheme: auth.scheme, credentials: auth.credentials } : null,
    wireVersion: context?.requestedVersion === A2A_PROTOCOL ? A2A_PROTOCOL : '0.3',
  };
}

/** Refuses a config before the message carrying it is sent. @throws BatonError subscription_url_refused, field_too_long */
export function checkConfig(call: A2aCall, c: TaskPushNotificationConfig): void {
  checkPushConfig(call.core, c.url, pushConfigOf(c, undefined));
}

/**
 * Registers `c` on task `taskId` (one the caller may read). `fromStart`: the config came with the
 * message that made the task, so its every transition is pushed; else only later ones.
 */
export async function registerConfig(
  call: A2aCall,
  taskId: string,
  c: TaskPushNotificationConfig,
  context: ServerCallContext | undefined,
  fromStart: boolean,
): Promise<TaskPushNotificationConfig> {
  const project = await resolveProject(call.core, call.project);
  const s = await createPushConfig(call.core, {
    projectId: project.id,
    owner: ownerOf(call),
    handoffId: taskId,
    url: c.url,
    push: pushConfigOf(c, context),
    fromStart,
  });
  return configOf(s);
}

export async function getConfig(call: A2aCall, p: GetTaskPushNotificationConfigRequest): Promise<TaskPushNotificationConfig> {
  return configOf(await findPushConfig(call.core, p.taskId, p.id, ownerOf(call)));
}

/** Every config of the task the caller registered, on one page (at most LIMITS.pushConfigsPerTask). */
export async function listConfigs(
  call: A2aCall,
  p: ListTaskPushNotificationConfigsRequest,
): Promise<ListTaskPushNotificationConfigsResponse> {
  return { configs: (await pushConfigsOf(call.core, p.taskId, ownerOf(call))).map(configOf), nextPageToken: '' };
}

export async function deleteConfig(call: A2aCall, p: DeleteTaskPushNotificationConfigRequest): Promise<void> {
  await removePushConfig(call.core, p.taskId, p.id, ownerOf(call));
}
