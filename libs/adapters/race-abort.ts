/** Resolves like `promise`, or rejects with the signal's reason as soon as it aborts. Leaves no listener behind. */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** What an aborted wait rejects with: the signal's own reason, else a plain "aborted". */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new Error('aborted');
}

/** The controllers that follow each source signal (followAbort): one listener per source, however many follow it. */
const followers = new WeakMap<AbortSignal, Set<AbortController>>();

/**
 * Aborts `controller` when `source` aborts, with its reason (at once when it already has), until
 * the function returned is called; call it when the work is over, or the source keeps the
 * controller. A source shared by many calls at once (a worker's shutdown signal, a signal that
 * never aborts) carries one listener for all of them: a listener per call made Node warn of a
 * possible EventTarget leak past ten at once, and AbortSignal.any costs more on Node 20 and
 * leaves a weak reference in every source (docs/performance-history.md, "Kept templates that
 * were not kept, signals that follow, runs that follow").
 */
export function followAbort(source: AbortSignal, controller: AbortController): () => void {
  if (source.aborted) {
    controller.abort(source.reason);
    return () => undefined;
  }
  let following = followers.get(source);
  if (!following) {
    const set = new Set<AbortController>();
    source.addEventListener(
      'abort',
      () => {
        for (const c of set) c.abort(source.reason);
        set.clear();
      },
      { once: true },
    );
    followers.set(source, set);
    following = set;
  }
  const set = following;
  set.add(controller);
  return () => {
    set.delete(controller);
  };
}

/**
 * A signal that aborts when the first of `sources` does, with that one's reason (as
 * AbortSignal.any), and `unlink`, which stops it following them (see followAbort).
 */
export function anyAbort(sources: readonly AbortSignal[]): { readonly signal: AbortSignal; unlink(): void } {
  const controller = new AbortController();
  const unlinks: Array<() => void> = [];
  for (const source of sources) {
    unlinks.push(followAbort(source, controller));
    if (controller.signal.aborted) break;
  }
  return {
    signal: controller.signal,
    unlink: () => {
      for (const unlink of unlinks) unlink();
    },
  };
}
