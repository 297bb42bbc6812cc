import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client.ts';
import { DEFAULT_DATABASE_TIMEOUTS, type DatabaseTimeouts } from '../domain/database-timeouts.ts';
import type { Logger } from '../logging/create-logger.ts';
import { KeptRowQuery } from './row-templates.ts';
import { DatabaseLink } from './database-link.ts';
import { DATABASE_POOL_DEFAULTS } from '../config/component-defaults.ts';

export type { PrismaClient } from './generated/prisma/client.ts';

/** One process's handle on Postgres: a pg pool, and a Prisma client that runs on the same pool. */
export interface Database {
  readonly pool: pg.Pool;
  readonly prisma: PrismaClient;
  /** Whether Postgres can be reached, as this pool last found it (one line per outage and end). */
  readonly link: DatabaseLink;
  close(): Promise<void>;
}

// int8 (seq, event ids) and numeric come back as strings by default; keep them exact as bigint.
pg.types.setTypeParser(pg.types.builtins.INT8, (v: string) => BigInt(v));

const READ_TIMEOUT = 'Query read timeout';

/**
 * A pg client that ends its connection when a statement's reply does not come in time. pg's
 * `query_timeout` fails the caller but leaves the statement in flight on the socket; a client
 * handed back to the pool like that (Prisma releases a transaction's client without the error)
 * would make the next caller wait behind a reply that may never come. Ending the connection
 * also tells Postgres, once it can hear again, that nobody waits for the statement.
 */
class BoundedClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    // A connection can end while its client is out of the pool but between statements (a
    // Postgres restart's 57P01, a dropped link, or this class ending one whose reply timed out):
    // pg then emits 'error' with no statement to fail, and with no listener (the pool listens
    // only while the client is idle in it, a borrower only while it runs a statement) Node ends
    // the process. Whoever holds the client gets the failure from its next statement, and the
    // pool drops a client that can no longer be queried, so here there is nothing left to do.
    this.on('error', () => undefined);
  }

  // `any`: pg's query() is a set of overloads (promise or callback); this passes each through.
  /* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-return, @typescript-eslint/prefer-promise-reject-errors -- as above */
  override query(...args: unknown[]): any {
    const run = (a: unknown[]): unknown => (super.query as (...q: unknown[]) => unknown).apply(this, a);
    const first = args[0] as Partial<pg.QueryConfig> & { submit?: unknown };
    // A named statement (libs/db/prepared.ts) as pg's Query with the statement's kept row template.
    if (typeof first === 'object' && first !== null && typeof first.name === 'string' && first.submit === undefined && args.length <= 3) {
      // Goes through the callback path below (which ends a timed-out connection) as a Submittable.
      const values = Array.isArray(args[1]) ? (args[1] as unknown[]) : first.values;
      const query = new KeptRowQuery({ ...(first as pg.QueryConfig & { name: string }), ...(values ? { values } : {}) });
      const callback = args.find((a) => typeof a === 'function') as ((err: unknown, res: unknown) => void) | undefined;
      if (callback) return this.query(query, callback);
      return new Promise((resolve, reject) => this.query(query, (err: unknown, res: unknown) => (err ? reject(err) : resolve(res))));
    }
    const last = args.at(-1);
    if (typeof last === 'function') {
      const callback = last as (err: unknown, res: unknown) => void;
      return run([
        ...args.slice(0, -1),
        (err: unknown, res: unknown) => {
          this.endIfTimedOut(err);
          callback(err, res);
        },
      ]);
    }
    const result = run(args);
    if (result instanceof Promise) result.catch((err: unknown) => this.endIfTimedOut(err));
    return result;
  }
  /* eslint-enable @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-return, @typescript-eslint/prefer-promise-reject-errors */

  private endIfTimedOut(err: unknown): void {
    if (err instanceof Error && err.message === READ_TIMEOUT) this.connection.stream.destroy();
  }
}

/**
 * Opens a pool of at most `poolSize` connections. Nothing connects until the first query, so
 * a process can start while Postgres is down and report unreadiness instead of crashing.
 * Every call is bounded (`timeouts`, default DEFAULT_DATABASE_TIMEOUTS): waiting for a
 * connection by `connectMs`, each statement's reply by `queryMs` (Postgres cancels the
 * statement after as long; a reply that never comes ends its connection, which is never reused).
 * Past either, the call fails with an error `classifyDatabaseError` turns into
 * `database_unavailable`.
 */
export function openDatabase(opts: {
  url: string;
  poolSize: number;
  logger: Logger;
  applicationName?: string;
  timeouts?: DatabaseTimeouts;
}): Database {
  const timeouts = opts.timeouts ?? DEFAULT_DATABASE_TIMEOUTS;
  const link = new DatabaseLink(opts.logger);
  // Every new connection's outcome tells the link whether Postgres can be reached.
  class WatchedClient extends BoundedClient {
    override connect(): Promise<pg.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
    override connect(callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): Promise<pg.Client> | void {
      if (!callback) {
        return super.connect().then(
          (client) => {
            link.connected();
            return client;
          },
          (err: Error) => {
            link.failed(err);
            throw err;
          },
        );
      }
      super.connect(((err: Error | null, client: pg.Client) => {
        if (err) link.failed(err);
        else link.connected();
        (callback as (e: Error | null, c: pg.Client) => void)(err, client);
      }) as (err: Error) => void);
    }
  }
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.poolSize,
    connectionTimeoutMillis: timeouts.connectMs,
    query_timeout: timeouts.queryMs,
    statement_timeout: timeouts.queryMs,
    keepAlive: true,
    idleTimeoutMillis: DATABASE_POOL_DEFAULTS.idleTimeoutMs,
    application_name: opts.applicationName ?? 'baton',
    Client: WatchedClient,
  });
  // An idle client's connection dying (Postgres restart) must not crash the process.
  pool.on('error', (err) => link.failed(err));
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: false }) });
  let closed = false;
  return {
    pool,
    prisma,
    link,
    async close() {
      if (closed) return;
      closed = true;
      // Closing: pool.end() below ends the connections Prisma's adapter used.
      await prisma.$disconnect().catch(() => undefined);
      await pool.end();
    },
  };
}

/**
 * Whether Postgres at `url` accepts a connection and answers `SELECT 1` within `timeoutMs`.
 * Tries once, on a connection of its own that it closes (the caller decides whether to try again).
 * @throws pg's error: a SQLSTATE (3D000 no such database, 28P01 login refused, 57P03 starting
 * up) or a network code (ECONNREFUSED, ...), or a timeout with neither.
 */
export async function pingPostgres(url: string, timeoutMs: number): Promise<void> {
  const client = new pg.Client({
    connectionString: url,
    application_name: 'baton-probe',
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    // A probe: its answer is above; ending a connection that never opened can fail too.
    await client.end().catch(() => undefined);
  }
}
