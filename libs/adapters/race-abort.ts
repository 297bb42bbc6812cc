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
