import { describe, expect, it } from 'vitest';
import { isUuid, newId } from '../../libs/domain/ids.ts';

describe('newId (UUIDv7 from a pooled random buffer)', () => {
  it('is a version-7, RFC 9562 variant UUID carrying the given milliseconds', () => {
    const at = Date.UTC(2026, 10, 29, 12, 0, 0, 123);
    const id = newId(at);
    expect(isUuid(id)).toBe(true);
    expect(id[14]).toBe('7');
    expect('89ab').toContain(id[19]);
    expect(parseInt(id.replace(/-/g, '').slice(0, 12), 16)).toBe(at);
  });

  it('never repeats across many pool refills, and sorts by creation time', () => {
    const seen = new Set<string>();
    const at = Date.now();
    // 40,000 ids: the 4 KiB pool (256 ids) is refilled over 150 times.
    for (let i = 0; i < 40_000; i++) seen.add(newId(at));
    expect(seen.size).toBe(40_000);
    const earlier = newId(at - 1);
    const later = newId(at + 1);
    expect(earlier < newId(at) && newId(at) < later).toBe(true);
  });

  it('does not hand out bytes that a later id overwrites', () => {
    const first = newId(1);
    for (let i = 0; i < 1_000; i++) newId(2);
    expect(first.slice(0, 13)).toBe('00000000-0001');
    expect(isUuid(first)).toBe(true);
  });
});
