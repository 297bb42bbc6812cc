import { V1PushNotificationSerializer, type PushNotificationSerializer } from '@a2a-js/sdk/server';
import { V03PushNotificationSerializer } from '@a2a-js/sdk/compat/v0_3/server';
import type { HandoffView } from '../db/records.ts';
import type { PushConfig } from '../db/subscription-repository.ts';
import { taskOf } from './present-task.ts';

/** The header A2A names for the client's token when the config sets no authentication. */
export const NOTIFICATION_TOKEN_HEADER = 'x-a2a-notification-token';

const SERIALIZERS: Record<string, PushNotificationSerializer> = {
  '1.0': new V1PushNotificationSerializer(),
  '0.3': new V03PushNotificationSerializer(),
};

/**
 * One A2A push notification: the task as it is now, in the shape of the version the config was
 * registered over (1.0: a `StreamResponse` holding the task, `application/a2a+json`; 0.3: the
 * bare Task), serialized by the SDK's own serializers. The client's credentials go into
 * `Authorization: <scheme> <credentials>`, else its token into X-A2A-Notification-Token, as the
 * SDK's sender does; the dispatcher adds Baton's signature and delivery id on top.
 */
export function pushNotification(push: PushConfig, h: HandoffView): { body: string; headers: Record<string, string> } {
  const task = taskOf(h);
  const serializer = SERIALIZERS[push.wireVersion] ?? SERIALIZERS['1.0']!;
  const { body, contentType } = serializer.serialize({ payload: { $case: 'task', value: task } }, task);
  const headers: Record<string, string> = { 'content-type': contentType };
  if (push.authentication !== null) headers['authorization'] = `${push.authentication.scheme} ${push.authentication.credentials}`;
  else if (push.token !== '') headers[NOTIFICATION_TOKEN_HEADER] = push.token;
  return { body, headers };
}
