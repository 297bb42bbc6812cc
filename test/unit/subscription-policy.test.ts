import { describe, expect, it } from 'vitest';
import { addressAllowed, addressKind, refusedUrl, retryAfterMs, retryDelayMs, verdictOf } from '../../libs/domain/subscription-policy.ts';

describe('subscription addresses', () => {
  it('tells loopback, private and public addresses apart, IPv4, IPv6 and mapped', () => {
    expect(['127.0.0.1', '::1', '[::1]', '::ffff:127.0.0.1'].map(addressKind)).toEqual(['loopback', 'loopback', 'loopback', 'loopback']);
    expect(
      [
        '10.1.2.3',
        '172.16.0.1',
        '172.31.255.255',
        '192.168.0.1',
        '169.254.169.254',
        '100.64.0.1',
        '0.0.0.0',
        'fd00::1',
        'fe80::1',
        '::',
      ].map(addressKind),
    ).toEqual(Array(10).fill('private'));
    expect(['8.8.8.8', '172.32.0.1', '2001:db8::1', '::ffff:8.8.8.8'].map(addressKind)).toEqual(['public', 'public', 'public', 'public']);
    expect(addressKind('example.com')).toBeNull();
  });

  it('applies the policy: any, no-private (the default: loopback allowed), public', () => {
    expect(addressAllowed('any', 'private')).toBe(true);
    expect([
      addressAllowed('no-private', 'loopback'),
      addressAllowed('no-private', 'private'),
      addressAllowed('no-private', 'public'),
    ]).toEqual([true, false, true]);
    expect([addressAllowed('public', 'loopback'), addressAllowed('public', 'public')]).toEqual([false, true]);
    expect(refusedUrl('http://127.0.0.1:8080/x', 'no-private')).toBeNull();
    expect(refusedUrl('http://localhost/x', 'public')).toContain('loopback');
    expect(refusedUrl('http://169.254.169.254/latest', 'no-private')).toContain('private');
    expect(refusedUrl('file:///etc/passwd', 'any')).toContain('http');
  });
});

describe('what an answer means', () => {
  it('2xx delivered; no answer, 5xx, 408, 429 retried; any other answer (3xx, 4xx) given up', () => {
    const at = (status: number, retryAfter?: string) => verdictOf({ status, retryAfter, error: '' }, 0).kind;
    expect([200, 204].map((s) => at(s))).toEqual(['delivered', 'delivered']);
    expect([0, 500, 503, 408, 429].map((s) => at(s))).toEqual(Array(5).fill('retry'));
    expect([301, 302, 400, 401, 404, 410, 422].map((s) => at(s))).toEqual(Array(7).fill('dead'));
  });

  it('honours Retry-After in seconds or as a date, and backs off exponentially with jitter up to the cap', () => {
    expect(retryAfterMs('3', 0)).toBe(3000);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(retryAfterMs('soon', 0)).toBe(0);
    const o = { baseMs: 1000, maxMs: 10_000 };
    expect([1, 2, 3, 4, 5, 9].map((n) => retryDelayMs(n, 0, o, 0.999999))).toEqual([999, 1999, 3999, 7999, 9999, 9999]);
    expect(retryDelayMs(1, 0, o, 0)).toBe(500);
    expect(retryDelayMs(1, 7_000, o, 0)).toBe(7_000);
    expect(retryDelayMs(1, 60_000, o, 0)).toBe(10_000);
  });
});
