import { describe, expect, it } from 'vitest';
import { nestedTooDeepAt } from '../../libs/domain/json-depth.ts';
import { LIMITS } from '../../libs/domain/limits.ts';
import { unstorableTextAt } from '../../libs/domain/storable-text.ts';
import { parseTimestamp } from '../../libs/domain/timestamps.ts';

describe('unstorableTextAt: text is stored as sent or refused', () => {
  it('finds NUL and unpaired surrogates in strings and keys, at any depth, and names where', () => {
    expect(unstorableTextAt({ a: 'fine 🚀 \u202e عربى', b: ['x', { c: 'y' }] })).toBeNull();
    expect(unstorableTextAt('a\u0000b')).toBe('/');
    expect(unstorableTextAt({ context: { openQuestions: ['ok', 'bad\ud800'] } })).toBe('/context/openQuestions/1');
    expect(unstorableTextAt({ 'k\udc00': 1 })).toBe('/k\udc00');
    expect(unstorableTextAt({ 'a/b': 'x\u0000' })).toBe('/a~1b');
    // A correctly paired surrogate (an emoji) is fine.
    expect(unstorableTextAt('\ud83d\ude80')).toBeNull();
  });

  // Protects: no depth cutoff below what the API accepts (it stopped at 64 levels, and Postgres then refused the NUL with a 500), and no recursion to overflow.
  it('finds a NUL however deep it is, without overflowing the stack', () => {
    for (const levels of [LIMITS.jsonDepth, 65, 10_000]) {
      expect(unstorableTextAt(JSON.parse(`${'{"a":'.repeat(levels)}"x\\u0000"${'}'.repeat(levels)}`)), `${levels} levels`).toBe(
        '/a'.repeat(levels),
      );
      expect(unstorableTextAt(JSON.parse(`${'['.repeat(levels)}"ok"${']'.repeat(levels)}`)), `${levels} levels`).toBeNull();
    }
  });

  it('names the first offending text in document order', () => {
    expect(unstorableTextAt({ a: ['ok', { b: 'x\u0000' }], c: '\u0000' })).toBe('/a/1/b');
    expect(unstorableTextAt({ a: 'ok', ['b\u0000']: 'x', c: '\u0000' })).toBe('/b\u0000');
  });
});

describe('nestedTooDeepAt: the body depth limit', () => {
  const objects = (levels: number) => JSON.parse(`${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`) as unknown;

  // Protects: the documented limit counts the body as level 1 and refuses exactly past it, pointing at the first container too deep.
  it('accepts nesting up to the limit and names the first container past it', () => {
    expect(nestedTooDeepAt(objects(LIMITS.jsonDepth), LIMITS.jsonDepth)).toBeNull();
    expect(nestedTooDeepAt(objects(LIMITS.jsonDepth + 1), LIMITS.jsonDepth)).toBe('/a'.repeat(LIMITS.jsonDepth));
    expect(nestedTooDeepAt({ x: 'flat', list: [[1], { 'a/b': [[]] }] }, 3)).toBe('/list/1/a~1b');
    expect(nestedTooDeepAt('text', 0)).toBeNull();
    expect(nestedTooDeepAt({}, 0)).toBe('/');
  });

  // Protects: measuring depth must not itself recurse, or the check would overflow where it should refuse.
  it('measures a value nested 100,000 levels deep without overflowing the stack', () => {
    const levels = 100_000;
    expect(nestedTooDeepAt(JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`), LIMITS.jsonDepth)).toBe('/0'.repeat(LIMITS.jsonDepth));
  });
});

describe('parseTimestamp: only times that exist', () => {
  it('accepts ISO 8601 with Z or an offset, and fractions', () => {
    expect(parseTimestamp('2026-12-01T09:00:00Z')?.toISOString()).toBe('2026-12-01T09:00:00.000Z');
    expect(parseTimestamp('2026-12-01T10:00:00.5+01:00')?.toISOString()).toBe('2026-12-01T09:00:00.500Z');
    expect(parseTimestamp('2028-02-29T00:00:00Z')).not.toBeNull();
  });

  it('refuses days a month lacks, leap seconds, hour 24, odd years and non-ISO text', () => {
    for (const bad of [
      '2026-02-30T00:00:00Z',
      '2027-02-29T00:00:00Z',
      '2026-06-30T23:59:60Z',
      '2026-01-01T24:00:00Z',
      '0000-01-01T00:00:00Z',
      '1969-12-31T23:59:59Z',
      'tomorrow',
      '2026-01-01',
      '2026-01-01T00:00:00',
      '2026-01-01T00:00:00+25:00',
    ]) {
      expect(parseTimestamp(bad), bad).toBeNull();
    }
  });
});
