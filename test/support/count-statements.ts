import type pg from 'pg';

/**
 * Counts the statements a real pool runs whose SQL text is exactly `text` (e.g. a batched
 * statement a repository exports) or passes `text` as a test, to tell how many calls shared
 * one. `stop()` puts the pool's own `query` back.
 */
export function countStatements(pool: pg.Pool, text: string | ((sql: string) => boolean)): { count(): number; stop(): void } {
  const matches = typeof text === 'string' ? (sql: unknown) => sql === text : (sql: unknown) => typeof sql === 'string' && text(sql);
  const target = pool as unknown as { query: (...args: unknown[]) => unknown };
  const query = target.query;
  let n = 0;
  target.query = function (this: unknown, ...args: unknown[]) {
    if (matches((args[0] as { text?: unknown } | undefined)?.text)) n++;
    return query.apply(this, args);
  };
  return { count: () => n, stop: () => void (target.query = query) };
}
