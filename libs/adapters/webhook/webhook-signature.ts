import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The signature of every request between Baton and a webhook agent, in both directions (the
 * turn Baton POSTs, the status and busy GETs, and the agent's callback to Baton):
 *
 *   Baton-Timestamp: <unix seconds>
 *   Baton-Signature: v1=<hex HMAC-SHA256 of `${timestamp}.${rawBody}` keyed with the agent's secret>
 *
 * A GET signs an empty body. A receiver recomputes the HMAC over the bytes it received, compares
 * in constant time and refuses a timestamp more than SIGNATURE_TOLERANCE_S from its clock.
 */
export const TIMESTAMP_HEADER = 'baton-timestamp';
export const SIGNATURE_HEADER = 'baton-signature';
/** How far a signed timestamp may be from the verifier's clock, either way. */
export const SIGNATURE_TOLERANCE_S = 300;

export function signatureOf(secret: string, timestamp: string, rawBody: string | Buffer): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

/** The two headers for a body signed now (`nowMs`: the caller's clock). */
export function signedHeaders(secret: string, rawBody: string | Buffer, nowMs: number): Record<string, string> {
  const timestamp = String(Math.floor(nowMs / 1000));
  return { [TIMESTAMP_HEADER]: timestamp, [SIGNATURE_HEADER]: `v1=${signatureOf(secret, timestamp, rawBody)}` };
}

export type SignatureCheck = 'ok' | 'invalid_signature' | 'stale_timestamp';

/**
 * Checks the headers of a signed request. The signature is checked first, so a caller without
 * the secret learns nothing about the timestamp rule. Several `v1=` values (comma separated)
 * may be given, e.g. while a secret is rotated; one match is enough.
 */
export function verifySignature(
  secret: string,
  headers: { readonly timestamp: string | undefined; readonly signature: string | undefined },
  rawBody: string | Buffer,
  nowMs: number,
): SignatureCheck {
  const { timestamp, signature } = headers;
  if (!timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) return 'invalid_signature';
  const expected = Buffer.from(signatureOf(secret, timestamp, rawBody), 'hex');
  const matches = signature
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.startsWith('v1='))
    .some((part) => {
      const given = Buffer.from(part.slice(3), 'hex');
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
  if (!matches) return 'invalid_signature';
  return Math.abs(nowMs / 1000 - Number(timestamp)) > SIGNATURE_TOLERANCE_S ? 'stale_timestamp' : 'ok';
}
