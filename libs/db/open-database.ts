import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client.ts';
import type { Logger } from '../logging/create-logger.ts';

export type { PrismaClient } from './generated/prisma/client.ts';

/** One process's handle on Postgres: a pg pool, and a Prisma client that runs on the same pool. */
export interface Database {
  readonly pool: pg.Pool;
  readonly prisma: PrismaClient;
  close(): Promise<void>;
}

// int8 (seq, event ids) and numeric come back as strings by default; keep them exact as bigint.
pg.types.setTypeParser(pg.types.builtins.INT8, (v: string) => BigInt(v));

/**
 * Opens a pool of at most `poolSize` connections. Nothing connects until the first query, so
 * a process can start while Postgres is down and report unreadiness instead of crashing.
 */
export function openDatabase(opts: { url: string; poolSize: number; logger: Logger; applicationName?: string }): Database {
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.poolSize,
    connectionTimeoutMillis: 3_000,
    idleTimeoutMillis: 30_000,
    application_name: opts.applicationName ?? 'baton',
  });
  // An idle client's connection dying (Postgres restart) must not crash the process.
  pool.on('error', (err) => opts.logger.warn({ err }, 'postgres idle connection error'));
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: false }) });
  let closed = false;
  return {
    pool,
    prisma,
    async close() {
      if (closed) return;
      closed = true;
      await prisma.$disconnect().catch(() => undefined);
      await pool.end();
    },
  };
}
