import { BatonError } from './errors.ts';
import { LIMITS } from './limits.ts';

/**
 * What an agent's A2A card says of it beyond its registration: a description and its skills
 * (A2A's AgentSkill: id, name, description, tags, examples). Given when the agent is registered
 * (`POST /v1/agents` `description` and `skills`, `baton agent add --description --skill`) and
 * kept in its settings JSON under CARD_SETTINGS_KEY, beside the provider's own settings (which
 * are checked without it). The gateway's cards show it (services/api/routes/a2a/agent-cards.ts).
 */
export interface AgentSkillSetting {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly tags: readonly string[];
  readonly examples: readonly string[];
}

export interface AgentCardSettings {
  readonly description?: string;
  readonly skills?: readonly AgentSkillSetting[];
}

/** The key of the agent's settings that holds its card (never a provider's setting). */
export const CARD_SETTINGS_KEY = 'a2aCard';

const refuse = (what: string): never => {
  throw new BatonError('invalid_agent_card', `the agent card is not valid: ${what}`);
};

function text(value: unknown, path: string, max: number, required: boolean): string | undefined {
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string' || value.trim() === '') return refuse(`${path} must be a non-empty string`);
  if (value.length > max) return refuse(`${path} must be at most ${max} characters`);
  return value;
}

function texts(value: unknown, path: string, count: number, max: number): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) return refuse(`${path} must be a list of strings`);
  if (value.length > count) return refuse(`${path} must hold at most ${count} items`);
  return value.map((v, i) => text(v, `${path}/${i}`, max, true)!);
}

/**
 * The card as given, checked against LIMITS (agentDescription, agentSkills, skillId,
 * skillName, skillDescription, skillTags, skillTag, skillExamples, skillExample); skill ids
 * are unique.
 * @throws BatonError invalid_agent_card
 */
export function checkAgentCard(input: { description?: unknown; skills?: unknown }): AgentCardSettings {
  const description = text(input.description, 'description', LIMITS.agentDescription, false);
  if (input.skills !== undefined && !Array.isArray(input.skills)) refuse('skills must be a list');
  const raw = (input.skills ?? []) as unknown[];
  if (raw.length > LIMITS.agentSkills) refuse(`skills must hold at most ${LIMITS.agentSkills} skills`);
  const skills = raw.map((s, i): AgentSkillSetting => {
    if (typeof s !== 'object' || s === null || Array.isArray(s)) return refuse(`skills/${i} must be an object`);
    const o = s as Record<string, unknown>;
    const unknown = Object.keys(o).find((k) => !['id', 'name', 'description', 'tags', 'examples'].includes(k));
    if (unknown !== undefined) refuse(`skills/${i} has an unknown key ${JSON.stringify(unknown)}`);
    const id = text(o['id'], `skills/${i}/id`, LIMITS.skillId, true)!;
    return {
      id,
      name: text(o['name'], `skills/${i}/name`, LIMITS.skillName, false) ?? id,
      description: text(o['description'], `skills/${i}/description`, LIMITS.skillDescription, false) ?? '',
      tags: texts(o['tags'], `skills/${i}/tags`, LIMITS.skillTags, LIMITS.skillTag),
      examples: texts(o['examples'], `skills/${i}/examples`, LIMITS.skillExamples, LIMITS.skillExample),
    };
  });
  const ids = skills.map((s) => s.id);
  const twice = ids.find((id, i) => ids.indexOf(id) !== i);
  if (twice !== undefined) refuse(`skill id ${JSON.stringify(twice)} is given twice`);
  return { ...(description !== undefined ? { description } : {}), ...(skills.length > 0 ? { skills } : {}) };
}

/** The card kept in an agent's settings (nothing when it has none). */
export function agentCardOfSettings(settings: Readonly<Record<string, unknown>>): AgentCardSettings {
  const card = settings[CARD_SETTINGS_KEY];
  return typeof card === 'object' && card !== null && !Array.isArray(card) ? card : {};
}
