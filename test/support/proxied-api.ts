import type { FastifyInstance } from 'fastify';
import type { DatabaseTimeouts } from '../../libs/domain/database-timeouts.ts';
import { openDatabase, type Database } from '../../libs/db/open-database.ts';
import { createRepositories } from '../../libs/db/repositories.ts';
import type { CoreDeps } from '../../libs/handoffs/ports.ts';
import { TokenCache } from '../../libs/handoffs/token-cache.ts';
import { buildApp } from '../../services/api/app.ts';
import { startTcpProxy } from './tcp-proxy.ts';
import type { TestBaton } from './test-baton.ts';

export interface ProxiedApi {
  /** Between this API and the test Baton's database: loses replies, freezes, cuts. */
  readonly proxy: Awaited<ReturnType<typeof startTcpProxy>>;
  readonly app: FastifyInstance;
  readonly core: CoreDeps;
  readonly db: Database;
  /** A call as the test Baton's admin (over app.inject, no network). */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  stop(): Promise<void>;
}

/**
 * A second API app on the test Baton's database, reaching Postgres only through a TCP proxy
 * (test/support/tcp-proxy.ts), with its own pool and timeouts. The test Baton's own app, its
 * workers and the test's reads keep their direct connection. Tokens stay cached for the whole
 * test, so a call's statements are its own, never a token look-up.
 */
export async function startProxiedApi(baton: TestBaton, opts: { timeouts: DatabaseTimeouts; poolSize: number }): Promise<ProxiedApi> {
  const target = new URL(baton.databaseUrl);
  const proxy = await startTcpProxy(Number(target.port || 5432), target.hostname);
  const via = new URL(baton.databaseUrl);
  via.port = String(proxy.port);
  const db = openDatabase({ url: via.toString(), poolSize: opts.poolSize, logger: baton.logger, timeouts: opts.timeouts });
  const repos = createRepositories(db);
  const core: CoreDeps = { ...baton.core, ...repos, tokenCache: new TokenCache({ maxAgeMs: 60 * 60_000 }) };
  const app = await buildApp({
    core,
    turnReports: repos.turnReports,
    logger: baton.logger,
    defaultProject: 'default',
    checks: { database: async () => void (await db.pool.query('SELECT 1')), redis: async () => undefined },
  });
  return {
    proxy,
    app,
    core,
    db,
    async post(path, body, headers = {}) {
      const res = await app.inject({
        method: 'POST',
        url: path,
        payload: body as object,
        headers: { authorization: `Bearer ${baton.adminToken}`, ...headers },
      });
      return { status: res.statusCode, body: res.body === '' ? null : res.json() };
    },
    async stop() {
      proxy.thaw();
      await app.close();
      await db.close();
      await proxy.close();
    },
  };
}
