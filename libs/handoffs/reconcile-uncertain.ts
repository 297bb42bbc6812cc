import { UncertainObserver, type ObserverDeps } from './uncertain-observer.ts';

/**
 * One pass over the UNCERTAIN handoffs due for a history scan (reconcile-once.ts; the running
 * reconciler keeps an `UncertainObserver` instead): each is observed once, at most
 * OBSERVATIONS_PER_PROVIDER at a time per provider (and as many for turns with a final report on
 * record), a slot refilled as soon as its observation ends. Only agents of this deployment and
 * of the providers and pools this worker serves.
 * @returns how many UNCERTAIN handoffs moved or were scanned.
 */
export async function reconcileUncertain(deps: ObserverDeps, signal: AbortSignal = new AbortController().signal): Promise<number> {
  const observer = new UncertainObserver(deps, signal, { once: true });
  for (;;) {
    await observer.fill();
    if (observer.running === 0) break;
    await observer.next();
  }
  return observer.takeTouched();
}
