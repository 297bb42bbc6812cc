import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { DemoAgentHost } from '../../../libs/adapters/demo/demo-agent-host.ts';
import { loadConfig, type BatonConfig } from '../../../libs/config/load-config.ts';
import { CLI_DEFAULTS } from '../../../libs/config/component-defaults.ts';
import { INT_SETTINGS } from '../../../libs/config/int-settings.ts';
import { newId } from '../../../libs/domain/ids.ts';
import { AgentRepository } from '../../../libs/db/agent-repository.ts';
import { createLogger } from '../../../libs/logging/create-logger.ts';
import { deleteKeys, openRedis, scanKeys } from '../../../libs/queue/open-redis.ts';
import { createRepositories } from '../../../libs/db/repositories.ts';
import { systemClock } from '../../../libs/domain/clock.ts';
import { createToken, revokeToken } from '../../../libs/handoffs/manage-tokens.ts';
import { ApiClient } from '../../../libs/api-client/api-client.ts';
import type { CliContext } from '../cli-context.ts';
import { DEMO_AGENTS, DemoRelay } from './demo-relay.ts';
import { DemoReport } from './demo-report.ts';
import { BATON_BIN } from '../../../libs/processes/package-files.ts';
import { freePort, startEmbeddedPostgres, startPrivateRedis, type Started } from '../../../libs/processes/embedded-infra.ts';
import { startStack, type RunningStack } from '../start-stack.ts';
import type { ApiLauncher } from '../launchers.ts';

/** The API's usual port (BATON_API_PORT's default), taken when free. */
const DEFAULT_PORT = INT_SETTINGS.BATON_API_PORT.default;

async function portFree(port: number): Promise<boolean> {
  const net = await import('node:net');
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * `baton demo` (registered in commands/demo.ts): everything in one process on embedded defaults (Postgres from npm in a temp
 * dir, a private redis-server) unless DATABASE_URL / REDIS_URL are set; four simulated agents
 * hand work around until Ctrl+C, which stops everything and deletes the demo data. It prints
 * how to look a handoff up, then one line per handoff as it settles (every transition with
 * `verbose`), a summary line every few seconds, and a last summary when it stops (demo-report.ts).
 */
export async function runDemo(
  ctx: CliContext,
  opts: { thinkMs: number; chains: number; duration?: number; json?: boolean; verbose?: boolean },
  startApi: ApiLauncher,
): Promise<void> {
  // With --json every line is one JSON object (`type` says which); the text lines are not printed.
  const emit = opts.json ? (record: Record<string, unknown>) => ctx.out(JSON.stringify(record)) : undefined;
  const out = (line: string) => {
    if (!emit) ctx.out(line);
  };
  const base = ctx.config();
  const cleanups: Array<() => Promise<void>> = [];
  let stack: RunningStack | undefined;
  let revokeDemoToken: (() => Promise<void>) | undefined;
  let stopRequested = false;
  let resolveStop: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => {
    resolveStop = resolve;
  });
  const requestStop = () => {
    if (stopRequested) process.exit(1);
    stopRequested = true;
    resolveStop();
  };
  process.on('SIGINT', requestStop);
  process.on('SIGTERM', requestStop);

  const suffix = randomBytes(3).toString('hex');
  try {
    out('Baton demo: starting (Ctrl+C stops everything and deletes the demo data)');
    let databaseUrl = base.databaseUrl;
    let redisUrl = base.redisUrl;
    if (!databaseUrl) {
      out('  Postgres: none configured (DATABASE_URL), starting an embedded one in a temp dir...');
      const pg: Started = await startEmbeddedPostgres();
      cleanups.unshift(pg.stop);
      databaseUrl = pg.url;
    } else {
      out('  Postgres: using DATABASE_URL (demo data goes to its own project and deployment, and is deleted at the end)');
    }
    if (!redisUrl) {
      out('  Redis: none configured (REDIS_URL), starting a private redis-server...');
      const redis = await startPrivateRedis();
      cleanups.unshift(redis.stop);
      redisUrl = redis.url;
    } else {
      out('  Redis: using REDIS_URL (demo keys get their own prefix and are deleted at the end)');
    }
    const port = ctx.env['BATON_API_PORT'] ? base.api.port : (await portFree(DEFAULT_PORT)) ? DEFAULT_PORT : await freePort();
    const project = base.databaseUrl ? `demo-${suffix}` : 'default';
    const config = loadConfig({
      ...ctx.env,
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl,
      BATON_API_PORT: String(port),
      BATON_REDIS_PREFIX: demoPrefix(base, suffix),
      BATON_PROJECT: project,
      // Quiet by default: the terminal is for the live view; set BATON_LOG_LEVEL to see more.
      BATON_LOG_LEVEL: base.setVariables.includes('BATON_LOG_LEVEL') ? base.logLevel : 'error',
    });
    const logger = createLogger({ level: config.logLevel, name: 'baton-demo' }, pino.destination(2));
    const demoHost = new DemoAgentHost({ defaultThinkMs: opts.thinkMs });
    // The demo writes nothing to BATON_HOME: it makes its own admin token, revoked at the end.
    stack = await startStack({ config, logger, api: true, worker: true, demoHost, bootstrapAdmin: false, startApi });
    const running = stack;
    if (base.databaseUrl) {
      const agents = new AgentRepository(running.db.prisma);
      const created = await agents.ensureProject(newId(), project, `Baton demo ${suffix}`);
      cleanups.unshift(async () => {
        const db = (await import('../../../libs/db/open-database.ts')).openDatabase({ url: config.databaseUrl!, poolSize: 1, logger });
        try {
          await new AgentRepository(db.prisma).deleteProject(created.id);
        } finally {
          await db.close();
        }
      });
    }
    if (base.redisUrl) {
      cleanups.unshift(() => deleteRedisPrefix(config.redisUrl!, config.redisPrefix, logger));
    }
    const tokenDeps = { ...createRepositories(running.db), clock: systemClock, logger };
    const admin = await createToken(tokenDeps, { admin: true, name: 'demo (revoked when the demo stops)' });
    revokeDemoToken = () => revokeToken(tokenDeps, admin.record.id);
    const url = running.api!.url;
    // Every variable the CLI would otherwise take from the environment or a profile, so the
    // printed command finds the demo's handoffs as it stands, wherever it is run.
    const lookup = `BATON_URL=${url} BATON_TOKEN=${admin.token} BATON_PROJECT=${project} ${BATON_BIN}`;
    out(`  API: ${url}   admin token: ${admin.token}   (project ${project}; the token dies with the demo)`);
    out(`  Live page: ${url}/ui/   (sign in with the admin token; Bull Board, read-only: ${url}/admin/queues)`);
    emit?.({
      type: 'started',
      api: url,
      token: admin.token,
      project,
      livePage: `${url}/ui/`,
      bullBoard: `${url}/admin/queues`,
      show: `${lookup} show <id>`,
    });
    const client = new ApiClient(url, project, admin.token);
    const relay = new DemoRelay(client);
    await relay.registerAgents(opts.thinkMs, (a) => emit?.({ type: 'agent_registered', agent: a.id, name: a.name, thinkMs: opts.thinkMs }));
    out(`  Agents: ${DEMO_AGENTS.map((a) => a.name).join(', ')} (simulated, ${opts.thinkMs} ms per turn)`);
    out('');
    out('Look a handoff up by its id, in another terminal, while the demo runs:');
    out(`  ${lookup} show <id>`);
    out('  (its live timeline: the same with `watch <id>`; every transition in this terminal: the demo with --verbose)');
    out('');
    const report = new DemoReport({ verbose: opts.verbose === true, out, emit });
    report.header();
    const startedAt = Date.now();
    await relay.start(opts.chains);
    if (opts.duration) setTimeout(requestStop, opts.duration * 1000).unref();
    let lastSummary = Date.now();
    while (!stopRequested) {
      const seen = await relay.tick();
      for (const t of seen.transitions) report.transition(t);
      for (const s of seen.settled) report.settled(s);
      if (Date.now() - lastSummary >= CLI_DEFAULTS.demoSummaryEveryMs) {
        lastSummary = Date.now();
        report.summary(relay.counts());
      }
      await Promise.race([stopped, new Promise((r) => setTimeout(r, 200))]);
    }
    report.final(relay.counts(), Date.now() - startedAt);
  } finally {
    // Teardown is best effort: each step runs whatever the one before did.
    await revokeDemoToken?.().catch(() => undefined);
    await stack?.stop().catch(() => undefined);
    for (const cleanup of cleanups) await cleanup().catch(() => undefined);
    process.off('SIGINT', requestStop);
    process.off('SIGTERM', requestStop);
    if (stack || cleanups.length > 0) {
      out('demo stopped; demo data deleted');
      emit?.({ type: 'stopped' });
    }
  }
}

/**
 * The demo's Redis prefix, which is also its deployment (agents.deployment). On a database or
 * Redis of someone else's it is one of its own, `baton-demo-<suffix>`: with DATABASE_URL set it
 * shares the database with a real deployment, and only its own deployment id keeps its workers
 * from sweeping, delivering or observing that deployment's agents (and theirs from the demo's),
 * also when it runs on a private Redis. On embedded Postgres and a private Redis nothing is
 * shared, so the configured prefix stands.
 */
export function demoPrefix(base: Pick<BatonConfig, 'databaseUrl' | 'redisUrl' | 'redisPrefix'>, suffix: string): string {
  return base.databaseUrl || base.redisUrl ? `baton-demo-${suffix}` : base.redisPrefix;
}

async function deleteRedisPrefix(
  url: string,
  prefix: string,
  logger: import('../../../libs/logging/create-logger.ts').Logger,
): Promise<void> {
  const redis = openRedis(url, 'worker', logger);
  try {
    await scanKeys(redis, `${prefix}:*`, deleteKeys, 500);
  } finally {
    redis.disconnect();
  }
}
