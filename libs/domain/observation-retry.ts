import { absenceScanSpacingMs, type DeliveryWindows } from './delivery-policy.ts';

/**
 * When an UNCERTAIN handoff's session history is looked at again after a look that learnt
 * nothing. Neither kind counts as a scan towards proving the turn absent; both move the
 * handoff's next-scan time (`not_before`), so a handoff that cannot be observed never comes back
 * ahead of the others and the newer ones are looked at meanwhile.
 */

/** After a scan that could not read the whole history (no status URL, say): it does not count. */
export const INCOMPLETE_SCAN_RETRY_MS = 5 * 60_000;

/**
 * After a look that failed outright (the adapter threw: its observe deadline passed, the status
 * URL answered 5xx, the host was unreachable): the first next look waits `firstMs`, each next
 * one `growth` times longer than the one before, up to the incomplete scan's retry time, and
 * never longer than the spacing of the complete scans (`absenceScanSpacingMs`), so a deployment
 * with short windows retries as fast as it scans. With the defaults: 15 s, 30 s, 1, 2, 4 min,
 * then every 5 min.
 */
export const FAILED_LOOK_RETRY = Object.freeze({ firstMs: 15_000, growth: 2 });

/**
 * How long after its `failedLooks`-th failed look in a row (1 for the first) an UNCERTAIN
 * handoff is looked at again. Pure.
 */
export function failedLookRetryMs(failedLooks: number, windows: DeliveryWindows): number {
  const cap = Math.min(INCOMPLETE_SCAN_RETRY_MS, absenceScanSpacingMs(windows));
  // Bounded exponent: past ~2^20 the cap has long been reached.
  const grown = FAILED_LOOK_RETRY.firstMs * FAILED_LOOK_RETRY.growth ** Math.min(20, Math.max(0, failedLooks - 1));
  return Math.max(0, Math.round(Math.min(grown, cap)));
}
