import { BatonError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import { SETTING_KEYS, parseSetting, settingsFrom, type RuntimeSettings, type SettingKey } from '../domain/runtime-settings.ts';
import type { ConnectionRecord } from '../db/settings-repository.ts';
import { liftHolds, type LiftHoldsDeps } from './lift-holds.ts';
import type { CoreDeps } from './ports.ts';
import { findAgents, resolveProject } from './resolve-project.ts';

/** A setting change: the write, then the lift of holds that no longer apply (read from the settings just written). */
export type SetSettingDeps = Pick<CoreDeps, 'settings'> & Omit<LiftHoldsDeps, 'settingsReader'>;

const fresh = (deps: Pick<CoreDeps, 'settings'>) => ({ get: async () => settingsFrom(await deps.settings.all()) });

export async function getSettings(deps: Pick<CoreDeps, 'settings'>): Promise<RuntimeSettings> {
  return fresh(deps).get();
}

/**
 * Sets a runtime setting (`enabled`, `enabledAfter`, `connections`, `outageGuard`). Holds
 * that no longer apply are lifted at once (the first page of them, HOLDS_PAGE_SIZE: the call
 * stays short; the reconciler lifts any more within one interval); workers see the change
 * within a second.
 * @throws BatonError unknown_setting, validation_failed (the value does not fit the key)
 */
export async function setSetting(deps: SetSettingDeps, key: string, value: unknown): Promise<RuntimeSettings> {
  if (!(SETTING_KEYS as readonly string[]).includes(key)) {
    throw new BatonError('unknown_setting', `no setting ${JSON.stringify(key)}; known: ${SETTING_KEYS.join(', ')}`);
  }
  const parsed = parseSetting(key as SettingKey, value);
  if (!parsed.ok) throw new BatonError('validation_failed', parsed.error);
  await deps.settings.set(key, parsed.value, deps.clock.now());
  deps.logger.info({ key }, 'setting changed');
  await liftHolds({ ...deps, settingsReader: fresh(deps) }, { maxPages: 1 });
  return getSettings(deps);
}

/**
 * Allows or blocks deliveries from one agent to another. A block holds (HELD) the pair's
 * deliveries that have not started; allowing lifts those holds at once (the first page of
 * them, as `setSetting` does).
 * @throws BatonError project_not_found, agent_not_found
 */
export async function setConnection(
  deps: SetSettingDeps & Pick<CoreDeps, 'agents'>,
  input: { project: string; from: string; to: string; rule: 'allow' | 'block' },
): Promise<ConnectionRecord[]> {
  const project = await resolveProject(deps, input.project);
  const from = input.from.toLowerCase();
  const to = input.to.toLowerCase();
  const [fromAgent, toAgent] = await findAgents(deps, project, [from, to]);
  if (!fromAgent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(from)} in project ${project.slug}`);
  if (!toAgent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(to)} in project ${project.slug}`);
  await deps.settings.setConnection(project.id, newId(deps.clock.now().getTime()), fromAgent.id, toAgent.id, input.rule, deps.clock.now());
  deps.logger.info({ from, to, rule: input.rule }, 'connection rule set');
  await liftHolds({ ...deps, settingsReader: fresh(deps) }, { maxPages: 1 });
  return deps.settings.connections(project.id);
}

export async function listConnections(deps: Pick<CoreDeps, 'agents' | 'settings'>, projectSlug: string): Promise<ConnectionRecord[]> {
  const project = await resolveProject(deps, projectSlug);
  return deps.settings.connections(project.id);
}
