import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, holdReason, parseSetting, settingsFrom } from '../../libs/domain/runtime-settings.ts';

const now = new Date('2026-06-01T12:00:00Z');

describe('runtime settings', () => {
  it('holds nothing by default', () => {
    expect(holdReason(DEFAULT_SETTINGS, null, now)).toBeNull();
    expect(holdReason(DEFAULT_SETTINGS, 'allow', now)).toBeNull();
  });

  it('holds everything while paused, and until enabledAfter passes', () => {
    expect(holdReason({ ...DEFAULT_SETTINGS, enabled: false }, 'allow', now)).toMatch(/paused/);
    const later = { ...DEFAULT_SETTINGS, enabledAfter: new Date('2026-06-01T13:00:00Z') };
    expect(holdReason(later, null, now)).toMatch(/until 2026-06-01T13:00:00.000Z/);
    expect(holdReason(later, null, new Date('2026-06-01T13:00:00Z'))).toBeNull();
  });

  it('holds a blocked connection, and in restricted mode every pair not allowed', () => {
    expect(holdReason(DEFAULT_SETTINGS, 'block', now)).toMatch(/blocked/);
    const restricted = { ...DEFAULT_SETTINGS, connections: 'restricted' as const };
    expect(holdReason(restricted, null, now)).toMatch(/restricted/);
    expect(holdReason(restricted, 'allow', now)).toBeNull();
  });

  it('parses each key strictly and says what it accepts', () => {
    expect(parseSetting('enabled', false)).toEqual({ ok: true, value: false });
    expect(parseSetting('enabled', 'no')).toMatchObject({ ok: false });
    expect(parseSetting('enabledAfter', '2026-12-01T09:00:00Z')).toEqual({ ok: true, value: '2026-12-01T09:00:00.000Z' });
    expect(parseSetting('enabledAfter', 'tomorrow')).toMatchObject({ ok: false, error: expect.stringMatching(/ISO 8601/) });
    expect(parseSetting('connections', 'restricted')).toMatchObject({ ok: true });
    expect(parseSetting('connections', 'closed')).toMatchObject({ ok: false });
    expect(parseSetting('outageGuard', { demo: { down: true, detail: 'maintenance' } })).toMatchObject({ ok: true });
    expect(parseSetting('outageGuard', { demo: { statusUrl: 'ftp://x' } })).toMatchObject({ ok: false });
    expect(parseSetting('outageGuard', { demo: { sideways: 1 } })).toMatchObject({ ok: false });
  });

  it('falls back to defaults for unknown keys and bad stored values', () => {
    const s = settingsFrom([
      { key: 'enabled', value: 'nope' },
      { key: 'connections', value: 'restricted' },
      { key: 'mystery', value: 1 },
    ]);
    expect(s.enabled).toBe(true);
    expect(s.connections).toBe('restricted');
  });
});
