/**
 * The rules of signed event subscriptions that need no I/O: which addresses a subscription may
 * be delivered to, what an answer means (delivered, retry, give up), and the back-off. The
 * dispatcher (libs/handoffs/subscription-dispatcher.ts) applies them.
 */

/**
 * BATON_SUBSCRIPTION_ADDRESSES: `any` delivers anywhere; `no-private` (the default) refuses
 * private and link-local addresses (10/8, 172.16/12, 192.168/16, 100.64/10, 169.254/16, 0/8,
 * fc00::/7, fe80::/10) but allows loopback and public ones; `public` refuses loopback too.
 */
export type SubscriptionAddressPolicy = 'any' | 'no-private' | 'public';
export const SUBSCRIPTION_ADDRESS_POLICIES: readonly SubscriptionAddressPolicy[] = ['any', 'no-private', 'public'];

export type AddressKind = 'loopback' | 'private' | 'public';

function v4Kind(ip: string): AddressKind | null {
  const parts = ip.split('.').map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) return null;
  const [a, b] = parts as [number, number, number, number];
  if (a === 127) return 'loopback';
  if (a === 10 || a === 0 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 169 && b === 254)) return 'private';
  if (a === 100 && b >= 64 && b <= 127) return 'private';
  return 'public';
}

/** What kind of address an IP literal is (null: not an IP literal). */
export function addressKind(ip: string): AddressKind | null {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  if (!bare.includes(':')) return v4Kind(bare);
  const lower = bare.toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return v4Kind(mapped[1]!);
  if (lower === '::1') return 'loopback';
  if (lower === '::' || /^f[cd]/.test(lower) || /^fe[89ab]/.test(lower)) return 'private';
  return 'public';
}

/** Whether the policy lets a delivery go to an address of this kind. */
export function addressAllowed(policy: SubscriptionAddressPolicy, kind: AddressKind): boolean {
  switch (policy) {
    case 'any':
      return true;
    case 'no-private':
      return kind !== 'private';
    case 'public':
      return kind === 'public';
    default: {
      const never: never = policy;
      return never;
    }
  }
}

/**
 * Whether a subscription URL may be registered: http(s), no credentials in it, and (for a
 * literal IP host) an address the policy allows. A host name is checked when delivering.
 * Answers the reason it may not, or null.
 */
export function refusedUrl(url: string, policy: SubscriptionAddressPolicy): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'the URL is not a valid absolute URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'the URL must be http:// or https://';
  if (u.username !== '' || u.password !== '') return 'the URL may not carry credentials';
  const kind = addressKind(u.hostname);
  if (kind !== null && !addressAllowed(policy, kind))
    return `${u.hostname} is a ${kind} address, refused by BATON_SUBSCRIPTION_ADDRESSES=${policy}`;
  if (kind === null && u.hostname.toLowerCase() === 'localhost' && !addressAllowed(policy, 'loopback'))
    return `localhost is a loopback address, refused by BATON_SUBSCRIPTION_ADDRESSES=${policy}`;
  return null;
}

/** What became of one POST. `status` 0: no answer (refused, timed out, reset). */
export interface PostAnswer {
  readonly status: number;
  /** The Retry-After header, as sent (seconds or an HTTP date). */
  readonly retryAfter?: string | undefined;
  readonly error: string;
}

export type DeliveryVerdict =
  | { readonly kind: 'delivered' }
  /** Try the same event again, no sooner than `notBeforeMs` from now (0: the back-off decides). */
  | { readonly kind: 'retry'; readonly notBeforeMs: number }
  /** Give up on this event: to the dead letters, and on with the next. */
  | { readonly kind: 'dead' };

/** 2xx delivered; no answer, 5xx, 408 and 429 retried (429 and 503 after Retry-After); any other answer (3xx: redirects are not followed, 4xx) gives up. */
export function verdictOf(a: PostAnswer, nowMs: number): DeliveryVerdict {
  if (a.status >= 200 && a.status < 300) return { kind: 'delivered' };
  if (a.status === 0 || a.status >= 500 || a.status === 429 || a.status === 408)
    return { kind: 'retry', notBeforeMs: retryAfterMs(a.retryAfter, nowMs) };
  return { kind: 'dead' };
}

/** A Retry-After header in milliseconds from now (seconds or an HTTP date); 0 when absent or unreadable. */
export function retryAfterMs(header: string | undefined, nowMs: number): number {
  if (header === undefined || header.trim() === '') return 0;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? 0 : Math.max(0, at - nowMs);
}

/**
 * The delay before attempt `attempts + 1` after `attempts` failures: exponential from `baseMs`,
 * capped at `maxMs`, with jitter (between half and all of it, `random` in [0, 1)); never less than what the receiver asked
 * (Retry-After), which is itself capped at `maxMs`.
 */
export function retryDelayMs(attempts: number, notBeforeMs: number, o: { baseMs: number; maxMs: number }, random: number): number {
  const ceiling = Math.min(o.maxMs, o.baseMs * 2 ** Math.min(30, Math.max(0, attempts - 1)));
  const jittered = Math.floor(ceiling / 2 + (random * ceiling) / 2);
  return Math.max(jittered, Math.min(notBeforeMs, o.maxMs));
}
