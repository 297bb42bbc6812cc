import { describe, expect, it } from 'vitest';
import type { Caller } from '../../libs/handoffs/caller.ts';
import { TokenCache } from '../../libs/handoffs/token-cache.ts';

const caller = (id: string): Caller => ({ tokenId: id, admin: false, agent: { id: `a-${id}`, handle: id }, projectSlug: 'default' });

describe('the token cache', () => {
  it('answers from memory for less than maxAgeMs after the Postgres read, then asks again', () => {
    let now = 1_000;
    const cache = new TokenCache({ maxAgeMs: 1_000, now: () => now });
    const started = cache.begin();
    now += 5; // the look-up took 5 ms: the age counts from before it
    cache.put('h1', caller('t1'), started);
    now = 1_999;
    expect(cache.get('h1')?.tokenId).toBe('t1');
    now = 2_000;
    expect(cache.get('h1')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('never keeps an answer read before an invalidation (a revocation racing a look-up)', () => {
    const cache = new TokenCache();
    const started = cache.begin();
    cache.forget(); // the revocation lands while the look-up is in flight
    cache.put('h1', caller('t1'), started);
    expect(cache.get('h1')).toBeUndefined();
    const again = cache.begin();
    cache.put('h1', caller('t1'), again);
    expect(cache.get('h1')?.tokenId).toBe('t1');
  });

  it('invalidate() empties this process at once and announces; forget() only empties', () => {
    let announced = 0;
    const cache = new TokenCache({ announce: () => announced++ });
    cache.put('h1', caller('t1'), cache.begin());
    cache.forget();
    expect(cache.get('h1')).toBeUndefined();
    expect(announced).toBe(0);
    cache.put('h1', caller('t1'), cache.begin());
    cache.invalidate();
    expect(cache.get('h1')).toBeUndefined();
    expect(announced).toBe(1);
  });

  it('keeps at most maxEntries, dropping the oldest', () => {
    const cache = new TokenCache({ maxEntries: 2 });
    for (const h of ['h1', 'h2', 'h3']) cache.put(h, caller(h), cache.begin());
    expect(cache.size).toBe(2);
    expect(cache.get('h1')).toBeUndefined();
    expect(cache.get('h3')?.tokenId).toBe('h3');
  });
});
