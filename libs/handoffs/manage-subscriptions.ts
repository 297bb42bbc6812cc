import { randomBytes } from 'node:crypto';
import { BatonError } from '../domain/errors.ts';
import { isUuid, newId } from '../domain/ids.ts';
import type { DeadLetterRecord, PushConfig, SubscriptionFilter, SubscriptionRecord } from '../db/subscription-repository.ts';
import { LIMITS } from '../domain/limits.ts';
import { refusedUrl } from '../domain/subscription-policy.ts';
import type { CoreDeps } from './ports.ts';
import { resolveProject } from './resolve-project.ts';

/** What the subscription use cases touch. */
export type SubscriptionDeps = Pick<CoreDeps, 'agents' | 'subscriptions' | 'clock' | 'subscriptionAddresses'>;

/**
 * Who manages subscriptions: an admin (every subscription of the project, and registers ones that
 * see every handoff), or an agent (only its own, which see only the handoffs it may see).
 */
export type SubscriptionOwner = { readonly admin: true } | { readonly admin: false; readonly agentId: string };

/** A new subscription and its secret: the only time the secret is shown. */
export interface CreatedSubscription {
  readonly subscription: SubscriptionRecord;
  readonly secret: string;
}

const newSecret = () => `bsub_${randomBytes(24).toString('hex')}`;

/**
 * Registers a subscription to the project's handoff events. `after`: deliver the events after
 * this id (0: the whole log); absent: only events after now.
 * @throws BatonError project_not_found, subscription_url_refused
 */
export async function createSubscription(
  deps: SubscriptionDeps,
  input: { project: string; owner: SubscriptionOwner; url: string; filter: SubscriptionFilter; after?: bigint | undefined },
): Promise<CreatedSubscription> {
  const project = await resolveProject(deps, input.project);
  const refused = refusedUrl(input.url, deps.subscriptionAddresses ?? 'no-private');
  if (refused !== null) throw new BatonError('subscription_url_refused', refused);
  const secret = newSecret();
  const at = deps.clock.now();
  const filter: SubscriptionFilter = {
    ...(input.filter.handoffId !== undefined ? { handoffId: input.filter.handoffId.toLowerCase() } : {}),
    ...(input.filter.agents !== undefined ? { agents: input.filter.agents.map((a) => a.toLowerCase()) } : {}),
    ...(input.filter.states !== undefined ? { states: [...input.filter.states] } : {}),
    ...(input.filter.events !== undefined ? { events: [...input.filter.events] } : {}),
  };
  const subscription = await deps.subscriptions.create({
    id: newId(at.getTime()),
    projectId: project.id,
    ownerAgentId: input.owner.admin ? null : input.owner.agentId,
    url: input.url,
    secret,
    filter,
    position: input.after ?? null,
    at,
  });
  return { subscription, secret };
}

/** The subscriptions the owner may see in the project (an agent: its own). */
export async function listSubscriptions(
  deps: SubscriptionDeps,
  project: string,
  owner: SubscriptionOwner,
  limit: number,
): Promise<SubscriptionRecord[]> {
  const p = await resolveProject(deps, project);
  return deps.subscriptions.list(p.id, owner.admin ? null : owner.agentId, limit);
}

/**
 * One subscription the owner may see; another agent's is not found, as if it did not exist.
 * @throws BatonError project_not_found, subscription_not_found
 */
export async function findSubscription(deps: SubscriptionDeps, project: string, id: string, owner: SubscriptionOwner) {
  const p = await resolveProject(deps, project);
  const s = isUuid(id) ? await deps.subscriptions.find(id.toLowerCase()) : null;
  if (!s || s.projectId !== p.id || (!owner.admin && s.ownerAgentId !== owner.agentId))
    throw new BatonError('subscription_not_found', `no subscription ${JSON.stringify(id)} in project ${p.slug}`);
  return s;
}

/** A subscription with its oldest dead letters. */
export async function showSubscription(
  deps: SubscriptionDeps,
  project: string,
  id: string,
  owner: SubscriptionOwner,
  limit: number,
): Promise<{ subscription: SubscriptionRecord; deadLetters: DeadLetterRecord[] }> {
  const subscription = await findSubscription(deps, project, id, owner);
  return { subscription, deadLetters: await deps.subscriptions.deadLetters(subscription.id, limit) };
}

/** Deletes a subscription, its position and its dead letters; delivery stops. */
export async function removeSubscription(deps: SubscriptionDeps, project: string, id: string, owner: SubscriptionOwner): Promise<void> {
  const s = await findSubscription(deps, project, id, owner);
  await deps.subscriptions.remove(s.id);
}

/**
 * Delivers again: from just after `after` when given, else from the oldest dead letter. Events
 * after that point that were delivered already come again, with the same delivery ids. The dead
 * letters from that point on are cleared and the subscription is active again.
 * Answers the subscription as it is now and whether there was anything to replay.
 */
export async function replaySubscription(
  deps: SubscriptionDeps,
  input: { project: string; id: string; owner: SubscriptionOwner; after?: bigint | undefined },
): Promise<{ subscription: SubscriptionRecord; replayed: boolean }> {
  const s = await findSubscription(deps, input.project, input.id, input.owner);
  const position = await deps.subscriptions.replay(s.id, input.after ?? null);
  return { subscription: (await deps.subscriptions.find(s.id)) ?? s, replayed: position !== null };
}

/** Makes a paused subscription active again, from the event it stopped at. */
export async function resumeSubscription(
  deps: SubscriptionDeps,
  project: string,
  id: string,
  owner: SubscriptionOwner,
): Promise<SubscriptionRecord> {
  const s = await findSubscription(deps, project, id, owner);
  await deps.subscriptions.resume(s.id);
  return (await deps.subscriptions.find(s.id)) ?? s;
}

/** An A2A push-notification config as a caller gives it; an empty `configId` gets the subscription's id. */
export interface PushConfigInput {
  readonly projectId: string;
  readonly owner: SubscriptionOwner;
  /** The task (handoff) the caller may see. */
  readonly handoffId: string;
  readonly url: string;
  readonly push: PushConfig;
  /** Deliver the task's transitions from its first (a config sent with the message that made it); else only later ones. */
  readonly fromStart: boolean;
}

/**
 * Checks a push config before anything is recorded: its URL as a subscription's, its strings
 * within LIMITS.pushCredential.
 * @throws BatonError subscription_url_refused, field_too_long
 */
export function checkPushConfig(deps: Pick<SubscriptionDeps, 'subscriptionAddresses'>, url: string, push: PushConfig): void {
  const refused = refusedUrl(url, deps.subscriptionAddresses ?? 'no-private');
  if (refused !== null) throw new BatonError('subscription_url_refused', refused);
  const texts = [push.configId, push.token, push.authentication?.scheme ?? '', push.authentication?.credentials ?? ''];
  if (texts.some((t) => t.length > LIMITS.pushCredential))
    throw new BatonError(
      'field_too_long',
      `a push config's id, token, scheme and credentials are at most ${LIMITS.pushCredential} characters`,
    );
}

/**
 * Registers an A2A push-notification config of a task: a subscription of kind a2a_push to the
 * handoff's events, owned like any subscription (an agent sees what it may see; an admin all).
 * The same config id again answers the config already there (a repeated message).
 * @throws BatonError subscription_url_refused, field_too_long, too_many_push_configs
 */
export async function createPushConfig(deps: SubscriptionDeps, input: PushConfigInput): Promise<SubscriptionRecord> {
  checkPushConfig(deps, input.url, input.push);
  const at = deps.clock.now();
  const id = newId(at.getTime());
  const created = await deps.subscriptions.createPushConfig({
    id,
    projectId: input.projectId,
    ownerAgentId: input.owner.admin ? null : input.owner.agentId,
    handoffId: input.handoffId,
    url: input.url,
    secret: newSecret(),
    push: { ...input.push, configId: input.push.configId === '' ? id : input.push.configId },
    fromStart: input.fromStart,
    max: LIMITS.pushConfigsPerTask,
    at,
  });
  if (created === null)
    throw new BatonError('too_many_push_configs', `the task has ${LIMITS.pushConfigsPerTask} push-notification configs; delete one first`);
  return created;
}

const ownsPush = (s: SubscriptionRecord, owner: SubscriptionOwner) => owner.admin || s.ownerAgentId === owner.agentId;

/** The task's push configs the owner registered (an admin: all of them). */
export async function pushConfigsOf(deps: SubscriptionDeps, handoffId: string, owner: SubscriptionOwner): Promise<SubscriptionRecord[]> {
  return (await deps.subscriptions.pushConfigs(handoffId)).filter((s) => ownsPush(s, owner));
}

/** @throws BatonError push_config_not_found (also for another agent's) */
export async function findPushConfig(
  deps: SubscriptionDeps,
  handoffId: string,
  configId: string,
  owner: SubscriptionOwner,
): Promise<SubscriptionRecord> {
  const s = await deps.subscriptions.findPushConfig(handoffId, configId);
  if (s === null || !ownsPush(s, owner))
    throw new BatonError('push_config_not_found', `task ${handoffId} has no push-notification config ${JSON.stringify(configId)}`);
  return s;
}

/** Deletes a push config: nothing more is POSTed for it. @throws BatonError push_config_not_found */
export async function removePushConfig(deps: SubscriptionDeps, handoffId: string, configId: string, owner: SubscriptionOwner) {
  const s = await findPushConfig(deps, handoffId, configId, owner);
  await deps.subscriptions.remove(s.id);
}
