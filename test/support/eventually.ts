/**
 * Polls `check` until it returns without throwing (or returns a value other than false), up to
 * `timeoutMs`; then fails with the last error. For waiting on asynchronous delivery without
 * fixed sleeps.
 */
export async function eventually<T>(
  check: () => Promise<T> | T,
  opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const intervalMs = opts.intervalMs ?? 25;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== false) return value;
      last = new Error('condition was false');
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const reason = last instanceof Error ? last.message : String(last);
      throw new Error(`${opts.what ?? 'condition'} not met within ${timeoutMs} ms: ${reason}`, { cause: last });
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
