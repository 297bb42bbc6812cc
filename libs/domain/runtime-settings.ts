import { parseTimestamp } from './timestamps.ts';
/**
 * Runtime settings (`baton config KEY VALUE`, PUT /v1/settings/KEY), their defaults, and the
 * pure rules that read them. Stored as JSON in the `settings` table.
 */

export type ConnectionPolicy = 'open' | 'restricted';

/** A provider's outage guard: a status page to poll, or a manual switch. */
export interface OutageGuardSpec {
  /** GET this URL; the provider is down if it answers non-2xx or a statuspage-style major/critical indicator. */
  statusUrl?: string;
  /** Manual switch: true holds this provider's deliveries (WAITING) until set back. */
  down?: boolean;
  /** Shown on held deliveries. */
  detail?: string;
}

export interface RuntimeSettings {
  /** false pauses every delivery (HELD). */
  enabled: boolean;
  /** Delivery is paused (HELD) until this time. */
  enabledAfter: Date | null;
  /** open: every pair may deliver unless blocked; restricted: only explicitly allowed pairs. */
  connections: ConnectionPolicy;
  /** Per provider name. */
  outageGuard: Record<string, OutageGuardSpec>;
}

export const DEFAULT_SETTINGS: RuntimeSettings = Object.freeze({
  enabled: true,
  enabledAfter: null,
  connections: 'open',
  outageGuard: {},
});

export const SETTING_KEYS = ['enabled', 'enabledAfter', 'connections', 'outageGuard'] as const;
export type SettingKey = (typeof SETTING_KEYS)[number];

/**
 * Parses a stored or submitted value for `key`.
 * @returns the typed value, or an error message saying what the key accepts.
 */
export function parseSetting(key: SettingKey, value: unknown): { ok: true; value: unknown } | { ok: false; error: string } {
  switch (key) {
    case 'enabled':
      return typeof value === 'boolean' ? { ok: true, value } : { ok: false, error: 'enabled must be true or false' };
    case 'enabledAfter': {
      if (value === null) return { ok: true, value: null };
      const at = typeof value === 'string' ? parseTimestamp(value) : null;
      if (at) return { ok: true, value: at.toISOString() };
      return { ok: false, error: 'enabledAfter must be an ISO 8601 time (2026-12-01T09:00:00Z) or null' };
    }
    case 'connections':
      return value === 'open' || value === 'restricted'
        ? { ok: true, value }
        : { ok: false, error: 'connections must be "open" or "restricted"' };
    case 'outageGuard': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        return { ok: false, error: 'outageGuard must be an object: {"<provider>": {"statusUrl"?: url, "down"?: bool, "detail"?: text}}' };
      }
      for (const [provider, spec] of Object.entries(value as Record<string, unknown>)) {
        if (typeof spec !== 'object' || spec === null || Array.isArray(spec))
          return { ok: false, error: `outageGuard.${provider} must be an object` };
        const s = spec as Record<string, unknown>;
        const extra = Object.keys(s).filter((k) => !['statusUrl', 'down', 'detail'].includes(k));
        if (extra.length > 0) return { ok: false, error: `outageGuard.${provider} has unknown fields: ${extra.join(', ')}` };
        if (s['statusUrl'] !== undefined && (typeof s['statusUrl'] !== 'string' || !/^https?:\/\//.test(s['statusUrl']))) {
          return { ok: false, error: `outageGuard.${provider}.statusUrl must be an http(s) URL` };
        }
        if (s['down'] !== undefined && typeof s['down'] !== 'boolean')
          return { ok: false, error: `outageGuard.${provider}.down must be true or false` };
        if (s['detail'] !== undefined && (typeof s['detail'] !== 'string' || s['detail'].length > 500)) {
          return { ok: false, error: `outageGuard.${provider}.detail must be text of at most 500 characters` };
        }
      }
      return { ok: true, value };
    }
  }
}

/** Builds settings from stored rows; a bad stored value falls back to the default. */
export function settingsFrom(rows: ReadonlyArray<{ key: string; value: unknown }>): RuntimeSettings {
  const out: RuntimeSettings = { ...DEFAULT_SETTINGS, outageGuard: {} };
  for (const { key, value } of rows) {
    if (!(SETTING_KEYS as readonly string[]).includes(key)) continue;
    const parsed = parseSetting(key as SettingKey, value);
    if (!parsed.ok) continue;
    if (key === 'enabled') out.enabled = parsed.value as boolean;
    else if (key === 'enabledAfter') out.enabledAfter = parsed.value === null ? null : new Date(parsed.value as string);
    else if (key === 'connections') out.connections = parsed.value as ConnectionPolicy;
    else if (key === 'outageGuard') out.outageGuard = parsed.value as Record<string, OutageGuardSpec>;
  }
  return out;
}

/** Why a delivery must be HELD right now, or null when nothing holds it. Pure. */
export function holdReason(settings: RuntimeSettings, connectionRule: 'allow' | 'block' | null, now: Date): string | null {
  if (!settings.enabled) return 'delivery is paused (enabled = false)';
  if (settings.enabledAfter && now < settings.enabledAfter) return `delivery is paused until ${settings.enabledAfter.toISOString()}`;
  return connectionHold(settings.connections, connectionRule);
}

/**
 * Why the sender may not reach the recipient now (a blocked connection, or a restricted
 * project without an allow), or null. Checked on send, and again before every write. Pure.
 */
export function connectionHold(policy: ConnectionPolicy, connectionRule: 'allow' | 'block' | null): string | null {
  if (connectionRule === 'block') return 'the connection from the sender to the recipient is blocked';
  if (policy === 'restricted' && connectionRule !== 'allow') {
    return 'connections are restricted and this sender is not allowed to reach this recipient';
  }
  return null;
}
