import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { Agent, request } from 'undici';
import {
  addressAllowed,
  addressKind,
  refusedUrl,
  type PostAnswer,
  type SubscriptionAddressPolicy,
} from '../../domain/subscription-policy.ts';
import { signedHeaders } from './webhook-signature.ts';

/** POSTs one signed JSON body to a URL and tells what came of it; never throws. */
export interface SignedPoster {
  post(req: { url: string; secret: string; body: string; headers: Record<string, string>; nowMs: number }): Promise<PostAnswer>;
  close(): Promise<void>;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net.connect that refuses what the policy refuses, after DNS: the address
 * connected to is the address checked, so a name that resolves to a private address is refused
 * as the literal would be.
 */
function guardedLookup(policy: SubscriptionAddressPolicy) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const list = addresses;
      const refused = list.find((a) => !addressAllowed(policy, addressKind(a.address) ?? 'public'));
      if (refused) {
        const e: NodeJS.ErrnoException = new Error(`address ${refused.address} refused by BATON_SUBSCRIPTION_ADDRESSES=${policy}`);
        e.code = 'BATON_ADDRESS_REFUSED';
        return callback(e, []);
      }
      if (options.all) return callback(null, list);
      const first = list[0]!;
      callback(null, first.address, first.family);
    });
  };
}

/**
 * The signed POST of event subscriptions, signed as the webhook adapter signs
 * (webhook-signature.ts: `Baton-Timestamp`, `Baton-Signature: v1=<HMAC-SHA256 of timestamp.body>`).
 * Redirects are never followed (undici's request does not follow them: a 3xx is an answer),
 * every connection's address is checked against the policy, and the whole request has one
 * deadline. The secret goes into the signature only, never into an error or a log line.
 */
export function createSignedPoster(opts: { policy: SubscriptionAddressPolicy; timeoutMs: number; errorChars: number }): SignedPoster {
  const dispatcher = new Agent({
    connect: { lookup: guardedLookup(opts.policy), timeout: opts.timeoutMs },
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
  });
  return {
    async post(req) {
      // An IP literal is connected to without a look-up: checked here (the policy may have changed since it was registered).
      const literal = refusedUrl(req.url, opts.policy);
      if (literal !== null) return { status: 403, error: literal };
      const signal = AbortSignal.timeout(opts.timeoutMs);
      try {
        const res = await request(req.url, {
          method: 'POST',
          dispatcher,
          signal,
          body: req.body,
          headers: { 'content-type': 'application/json', ...req.headers, ...signedHeaders(req.secret, req.body, req.nowMs) },
        });
        const text = (await res.body.text()).slice(0, opts.errorChars);
        const retryAfter = res.headers['retry-after'];
        return {
          status: res.statusCode,
          retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
          error: res.statusCode >= 200 && res.statusCode < 300 ? '' : `HTTP ${res.statusCode}${text ? `: ${text}` : ''}`,
        };
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        const refused =
          e.code === 'BATON_ADDRESS_REFUSED' || (e.cause as NodeJS.ErrnoException | undefined)?.code === 'BATON_ADDRESS_REFUSED';
        const message = signal.aborted ? `no answer within ${opts.timeoutMs} ms` : (e.message ?? String(err));
        // A refused address never becomes reachable by retrying: status 403 gives up at once.
        return { status: refused ? 403 : 0, error: refused ? message : `no answer: ${message}`.slice(0, opts.errorChars) };
      }
    },
    close: () => dispatcher.close(),
  };
}
