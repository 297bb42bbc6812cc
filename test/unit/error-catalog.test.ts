import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOG, ERROR_CODES } from '../../libs/domain/errors.ts';

describe('the error catalog and docs/ERRORS.md', () => {
  const doc = readFileSync(new URL('../../docs/ERRORS.md', import.meta.url), 'utf8');
  const documented = new Map(
    [...doc.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \| (yes|no) \|/gm)].map((m) => [
      m[1]!,
      { status: Number(m[2]), retryable: m[3] === 'yes' },
    ]),
  );

  it('documents every code with its status and retryability, and nothing else', () => {
    expect([...documented.keys()].sort()).toEqual([...ERROR_CODES].sort());
    for (const code of ERROR_CODES) {
      expect(documented.get(code), code).toEqual({ status: ERROR_CATALOG[code].status, retryable: ERROR_CATALOG[code].retryable });
    }
  });

  it('uses snake_case codes and 4xx/5xx statuses only', () => {
    for (const code of ERROR_CODES) {
      expect(code).toMatch(/^[a-z]+(_[a-z]+)*$/);
      expect(ERROR_CATALOG[code].status).toBeGreaterThanOrEqual(400);
    }
  });
});

describe('the limits and docs/API.md', () => {
  it('documents every limit with its value, and nothing else', async () => {
    const { LIMITS } = await import('../../libs/domain/limits.ts');
    const doc = readFileSync(new URL('../../docs/API.md', import.meta.url), 'utf8');
    const documented = Object.fromEntries([...doc.matchAll(/^\| `([A-Za-z]+)` \| (\d+) \|/gm)].map((m) => [m[1]!, Number(m[2])]));
    expect(documented).toEqual({ ...LIMITS });
  });
});
