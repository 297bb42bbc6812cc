import { describe, expect, it } from 'vitest';
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
});

describe('parseTimestamp: only times that exist', () => {
  it('accepts ISO 8601 with Z or an offset, and fractions', () => {
    expect(parseTimestamp('2026-12-01T09:00:00Z')?.toISOString()).toBe('2026-12-01T09:00:00.000Z');
    expect(parseTimestamp('2026-12-01T10:00:00.5+01:00')?.toISOString()).toBe('2026-12-01T09:00:00.500Z');
    expect(parseTimestamp('2028-02-29T00:00:00Z')).not.toBeNull();
  });

  it('refuses days a month lacks, leap seconds, hour 24, odd years and non-ISO text', () => {
    for (const bad of ['2026-02-30T00:00:00Z', '2027-02-29T00:00:00Z', '2026-06-30T23:59:60Z', '2026-01-01T24:00:00Z', '0000-01-01T00:00:00Z', '1969-12-31T23:59:59Z', 'tomorrow', '2026-01-01', '2026-01-01T00:00:00', '2026-01-01T00:00:00+25:00']) {
      expect(parseTimestamp(bad), bad).toBeNull();
    }
  });
});
