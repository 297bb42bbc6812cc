import { createHash } from 'node:crypto';
import type pg from 'pg';

/** A pool or a client inside a transaction: both run queries the same way. */
export interface Queryable {
  query<T extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<T>>;
}

const names = new Map<string, string>();

/** A stable name per SQL text: Postgres then parses and plans each statement once per connection. */
function statementName(text: string): string {
  let name = names.get(text);
  if (!name) {
    name = `baton_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
    names.set(text, name);
  }
  return name;
}

/**
 * Runs `text` as a named prepared statement. The hot-path statements are long CTEs whose
 * planning costs more than their execution when re-planned on every call.
 */
export function prepared<T extends pg.QueryResultRow>(db: Queryable, text: string, values: unknown[]): Promise<pg.QueryResult<T>> {
  return db.query<T>({ name: statementName(text), text, values });
}
