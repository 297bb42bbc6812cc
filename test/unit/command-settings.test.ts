import { describe, expect, it } from 'vitest';
import { COMMAND_DEFAULTS, parseCommandSettings } from '../../libs/adapters/command/command-settings.ts';
import { REDACTED } from '../../libs/adapters/provider-spec.ts';
import { providerSpec, redactProviderSettings, validateProviderSettings } from '../../libs/adapters/provider-specs.ts';

function refusal(settings: Record<string, unknown>): { code: string; message: string } | null {
  try {
    validateProviderSettings('command', settings);
    return null;
  } catch (err) {
    return { code: (err as { code: string }).code, message: (err as Error).message };
  }
}

describe('command provider settings', () => {
  it('accepts a full, valid configuration and applies the documented defaults to a minimal one', () => {
    expect(
      refusal({
        argv: ['/usr/bin/env', 'python3', 'agent.py'],
        cwd: '/srv/agent',
        env: { MODEL: 'small', API_KEY: { value: 's3cret', secret: true } },
        timeoutMs: 600_000,
        maxOutputBytes: 4096,
        busyExitCode: 10,
        refusedExitCode: 11,
      }),
    ).toBeNull();
    const parsed = parseCommandSettings({ argv: ['agent'] });
    expect(parsed).toEqual({
      ok: true,
      settings: {
        argv: ['agent'],
        cwd: null,
        env: {},
        timeoutMs: 3_600_000,
        maxOutputBytes: 65_536,
        busyExitCode: 75,
        refusedExitCode: 77,
      },
    });
    expect(COMMAND_DEFAULTS).toMatchObject({ busyExitCode: 75, refusedExitCode: 77 });
  });

  it.each([
    ['an unknown key', { argv: ['a'], shell: true }],
    ['no argv', {}],
    ['an empty argv', { argv: [] }],
    ['an empty program name', { argv: [''] }],
    ['argv as one string', { argv: 'agent --fast' }],
    ['a number in argv', { argv: ['agent', 3] }],
    ['a relative cwd', { argv: ['a'], cwd: 'work/here' }],
    ['an env name that is not a variable name', { argv: ['a'], env: { 'BAD-NAME': 'x' } }],
    ['an env value that is not a string', { argv: ['a'], env: { N: 3 } }],
    ['an unknown key in a secret env value', { argv: ['a'], env: { K: { value: 'x', secret: true, note: 1 } } }],
    ['an env name Baton sets itself', { argv: ['a'], env: { BATON_REQUEST_ID: 'x' } }],
    ['a NUL in an argument', { argv: ['a', 'b\0c'] }],
    ['a timeout that is not an integer', { argv: ['a'], timeoutMs: '60s' }],
    ['exit code 0 as the busy code', { argv: ['a'], busyExitCode: 0 }],
    ['an exit code above 255', { argv: ['a'], refusedExitCode: 256 }],
    ['the same code for busy and refused', { argv: ['a'], busyExitCode: 9, refusedExitCode: 9 }],
  ])('refuses %s with invalid_settings', (_what, settings) => {
    const r = refusal(settings);
    expect(r?.code).toBe('invalid_settings');
    expect(parseCommandSettings(settings as Record<string, unknown>).ok).toBe(false);
  });

  it('redacts secret env values on every read and leaves the rest as configured', () => {
    const settings = {
      argv: ['agent'],
      env: { MODEL: 'small', API_KEY: { value: 's3cret', secret: true }, SHOWN: { value: 'plain', secret: false } },
    };
    const shown = redactProviderSettings('command', settings);
    expect(shown).toEqual({
      argv: ['agent'],
      env: { MODEL: 'small', API_KEY: { value: REDACTED, secret: true }, SHOWN: { value: 'plain', secret: false } },
    });
    expect(JSON.stringify(shown)).not.toContain('s3cret');
    // The adapter still gets the real value.
    expect(parseCommandSettings(settings)).toMatchObject({
      ok: true,
      settings: { env: { API_KEY: 's3cret', MODEL: 'small', SHOWN: 'plain' } },
    });
  });

  it('declares short deadlines for starting a program and for reading its run record', () => {
    expect(providerSpec('command').deadlines).toEqual({ writeMs: 10_000, observeMs: 5_000, busyMs: 5_000 });
  });
});
