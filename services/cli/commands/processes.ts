import type { Command } from 'commander';
import { UsageError, nonNegativeInt, positiveInt, type CliContext } from '../cli-context.ts';
import { checkPorts } from '../check-ports.ts';
import type { ApiLauncher } from '../launchers.ts';

// The process commands load the server side (Prisma, BullMQ, Fastify) only when they run, so
// client commands such as `baton status` start fast.
const serverSide = async () => ({
  ...(await import('../../../libs/adapters/demo/demo-agent-host.ts')),
  ...(await import('../../../libs/adapters/demo/demo-host-server.ts')),
  ...(await import('../../../libs/db/migrate.ts')),
  ...(await import('../../../libs/logging/create-logger.ts')),
  ...(await import('../run-until-signal.ts')),
  ...(await import('../start-stack.ts')),
  ...(await import('../startup-error.ts')),
  ...(await import('../tune-heap.ts')),
});

/** Registers BATON_ADMIN_TOKEN (manage-tokens.ts `registerAdminToken`) over a connection of its own. */
async function registerAdminTokenOf(url: string, secret: string): Promise<'registered' | 'present'> {
  const [{ openDatabase }, { createRepositories }, { createLogger }, { systemClock }, { registerAdminToken }] = await Promise.all([
    import('../../../libs/db/open-database.ts'),
    import('../../../libs/db/repositories.ts'),
    import('../../../libs/logging/create-logger.ts'),
    import('../../../libs/domain/clock.ts'),
    import('../../../libs/handoffs/manage-tokens.ts'),
  ]);
  const logger = createLogger({ level: 'warn', name: 'baton-migrate' });
  const db = openDatabase({ url, poolSize: 1, logger, applicationName: `baton-migrate-${process.pid}` });
  try {
    return await registerAdminToken({ ...createRepositories(db), clock: systemClock, logger }, secret);
  } finally {
    await db.close();
  }
}

/**
 * `baton db migrate`, `serve`, `api`, `worker`, `demo-host`: the long-running processes. The API
 * server is started through `startApi` (services/api, handed in by the entry point).
 */
export function registerProcessCommands(program: Command, ctx: CliContext, startApi: ApiLauncher): void {
  const requireUrls = () => {
    const config = ctx.config();
    if (!config.databaseUrl)
      throw new UsageError('DATABASE_URL is not set, e.g. postgresql://postgres@127.0.0.1:5432/baton (or try `baton demo`)');
    if (!config.redisUrl) throw new UsageError('REDIS_URL is not set, e.g. redis://127.0.0.1:6379 (or try `baton demo`)');
    return config;
  };

  program
    .command('db')
    .description('database tasks')
    .command('migrate')
    .description(
      'apply the SQL migrations in prisma/migrations (safe to run twice, and concurrently); with BATON_ADMIN_TOKEN set, register it as an admin token once',
    )
    .option('--json', 'print JSON: { applied: [names], adminToken?: "registered" | "present" }')
    .action(async (opts: { json?: boolean }) => {
      const config = ctx.config();
      if (!config.databaseUrl) throw new UsageError('DATABASE_URL is not set');
      const { migrate, isPostgresFailure, postgresStartupError } = await serverSide();
      const url = config.databaseUrl;
      const applied = await migrate(url).catch((err: unknown) => {
        throw isPostgresFailure(err) ? postgresStartupError(err, url) : err;
      });
      const adminToken = config.adminToken === undefined ? undefined : await registerAdminTokenOf(url, config.adminToken);
      if (opts.json) return ctx.json({ applied, ...(adminToken ? { adminToken } : {}) });
      ctx.out(applied.length === 0 ? 'database is up to date' : `applied ${applied.join(', ')}`);
      // Never the token itself: this runs in a Job whose output lands in logs.
      if (adminToken) ctx.out(`admin token from BATON_ADMIN_TOKEN: ${adminToken === 'registered' ? 'registered' : 'already registered'}`);
    });

  const run = (name: string, description: string, roles: { api: boolean; worker: boolean }) =>
    program
      .command(name)
      .description(description)
      .option('--json', 'JSON log lines even on a terminal, and the start line as JSON: { "api": url | null, "worker": boolean }')
      .action(async (opts: { json?: boolean }) => {
        const config = requireUrls();
        // A busy port at once, before the server side loads (startStack checks again, for its other callers).
        await checkPorts(config, roles);
        const { createLogger, startStack, runUntilSignal, tuneHeap } = await serverSide();
        tuneHeap(config.heapGrowthPercent);
        const logger = createLogger({ level: config.logLevel, name: `baton-${name}`, json: opts.json === true });
        const stack = await startStack({ config, logger, ...roles, startApi });
        if (opts.json) ctx.json({ api: stack.api?.url ?? null, worker: stack.worker !== undefined });
        else if (stack.api) ctx.out(`Baton API on ${stack.api.url}`);
        await runUntilSignal(() => stack.stop(), logger, config.shutdownGraceMs);
      });

  run('serve', 'run the API and a delivery worker in one process (small setups)', { api: true, worker: true });
  run('api', 'run the HTTP API', { api: true, worker: false });
  run('worker', 'run a delivery worker (the providers in BATON_WORKER_PROVIDERS)', { api: false, worker: true });

  program
    .command('demo-host')
    .description('serve simulated demo sessions over HTTP, for several workers to share (BATON_DEMO_HOST_URL)')
    .option('--port <port>', 'port to listen on', positiveInt('--port', 65535))
    .option('--bind <address>', 'address to listen on (0.0.0.0 to serve other hosts or containers)', '127.0.0.1')
    .option('--think-ms <ms>', 'default time a simulated turn takes', nonNegativeInt('--think-ms', 3_600_000), 0)
    .option('--json', 'JSON log lines even on a terminal, and the start line as JSON: { "url": ... }')
    .action(async (opts: { port?: number; bind: string; thinkMs: number; json?: boolean }) => {
      const { createLogger, DemoAgentHost, serveDemoHost, runUntilSignal } = await serverSide();
      const logger = createLogger({ level: ctx.config().logLevel, name: 'baton-demo-host', json: opts.json === true });
      const host = new DemoAgentHost({ defaultThinkMs: opts.thinkMs });
      const served = await serveDemoHost(host, { bind: opts.bind, ...(opts.port ? { port: opts.port } : {}) });
      if (opts.json) ctx.json({ url: served.url });
      else ctx.out(`demo sessions on ${served.url}`);
      await runUntilSignal(() => served.close(), logger);
    });
}
