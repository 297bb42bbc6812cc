import type pg from 'pg';

/**
 * Counts the statements a real pool runs whose SQL text is exactly `text` (e.g. a batched
 * statement a repository exports), to tell how many calls shared one. `stop()` puts the pool's
 * own `query` back.
 */
export function countStatements(pool: pg.Pool, text: string): { count(): number; stop(): void } {
  const target = pool as unknown as { query: (...args: unknown[]) => unknown };
  const query = target.query;
  let n = 0;
  target.query = function (this: unknown, ...args: unknown[]) {
    if ((args[0] as { text?: unknown } | undefined)?.text === text) n++;
    return query.apply(this, args);
  };
  return { count: () => n, stop: () => void (target.query = query) };
}
