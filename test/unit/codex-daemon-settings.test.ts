import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { daemonSettingsFile, keepDaemonUpdaterOff } from '../../libs/adapters/codex/app-server-daemon.ts';

const homes: string[] = [];
const home = () => {
  const h = mkdtempSync(join(tmpdir(), 'baton-codex-home-'));
  homes.push(h);
  return h;
};
const settingsOf = (h: string) => JSON.parse(readFileSync(daemonSettingsFile(h), 'utf8')) as Record<string, unknown>;
const write = (h: string, value: unknown) => {
  mkdirSync(dirname(daemonSettingsFile(h)), { recursive: true });
  writeFileSync(daemonSettingsFile(h), typeof value === 'string' ? value : JSON.stringify(value));
};

afterEach(() => {
  for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
});

describe('keepDaemonUpdaterOff (the Codex daemon must not fetch and run install.sh)', () => {
  it('switches the updater off in a Codex home that has no daemon settings yet', async () => {
    const h = home();
    await keepDaemonUpdaterOff(h);
    expect(settingsOf(h)).toEqual({ updater: { autoUpdateEnabled: false } });
  });

  it('adds the switch to existing daemon settings and keeps everything else in them', async () => {
    const h = home();
    write(h, { remoteControlEnabled: true, updater: { updateIntervalMinutes: 90 } });
    await keepDaemonUpdaterOff(h);
    expect(settingsOf(h)).toEqual({ remoteControlEnabled: true, updater: { updateIntervalMinutes: 90, autoUpdateEnabled: false } });
  });

  it('keeps a choice the user made explicitly, and leaves a file it cannot read for Codex to report', async () => {
    const chosen = home();
    write(chosen, { updater: { autoUpdateEnabled: true } });
    await keepDaemonUpdaterOff(chosen);
    expect(settingsOf(chosen)).toEqual({ updater: { autoUpdateEnabled: true } });
    const broken = home();
    write(broken, '{not json');
    await keepDaemonUpdaterOff(broken);
    expect(readFileSync(daemonSettingsFile(broken), 'utf8')).toBe('{not json');
  });
});
