import { ConfigError } from '../../../libs/config/config-error.ts';
import { loadConfig, type BatonConfig } from '../../../libs/config/load-config.ts';
import { RedisNames } from '../../../libs/queue/redis-names.ts';
import type { CliConnection } from '../cli-context.ts';
import { checkApi, type ApiFindings } from './check-api.ts';
import { checkPostgres, type PostgresFindings } from './check-postgres.ts';
import { checkRedis } from './check-redis.ts';
import { fail, ok, reasonOf, warn, type DoctorCheck } from './doctor-check.ts';
import { providerChecks, type DoctorAgent } from './provider-checks.ts';

/** What `runDoctor` reads: the environment (as every process loads it) and the CLI's way to the API. */
export interface DoctorInput {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The URL, project and token client commands use; throws when the profile cannot be read. */
  connection(): CliConnection;
  /** Each network check's deadline. */
  readonly timeoutMs: number;
}

function configCheck(config: BatonConfig): DoctorCheck {
  const set = config.setVariables.filter((v) => v !== 'BATON_TOKEN');
  return ok(
    'config',
    set.length === 0
      ? 'valid; no Baton variable set (every default applies)'
      : `valid; set: ${set.join(', ')}${config.token !== undefined ? ', BATON_TOKEN' : ''}`,
  );
}

function agentsCheck(agents: readonly DoctorAgent[], from: string): DoctorCheck {
  if (agents.length === 0) return ok('agents', `none registered ${from}`);
  const counts = new Map<string, number>();
  for (const a of agents) counts.set(a.provider, (counts.get(a.provider) ?? 0) + 1);
  return ok(
    'agents',
    `${agents.length} active ${from}: ${[...counts]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([p, n]) => `${p} ${n}`)
      .join(', ')}`,
  );
}

/**
 * Every check of `baton doctor`, in the order they print: the configuration, Postgres and its
 * migrations, Redis and its eviction policy, the API and the token, then each agent's provider
 * prerequisites. A bad configuration stops there (nothing else can be read). Postgres, Redis and
 * the API are asked at once, each bounded by `timeoutMs`, so the whole run takes about one
 * timeout, plus a `--version` run per agent program.
 */
export async function runDoctor(input: DoctorInput): Promise<DoctorCheck[]> {
  let config: BatonConfig;
  try {
    config = loadConfig(input.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return [fail('config', err.message, 'fix that variable (README.md, "Configuration", lists each with what it takes)')];
  }
  const t = input.timeoutMs;
  const deployment = new RedisNames(config.redisPrefix).deployment;
  let connection: CliConnection | Error;
  try {
    connection = input.connection();
  } catch (err) {
    connection = err as Error;
  }
  const postgres: Promise<PostgresFindings> = config.databaseUrl
    ? checkPostgres(config.databaseUrl, deployment, t)
    : Promise.resolve({
        checks: [
          warn(
            'postgres',
            'DATABASE_URL is not set: not checked',
            'set DATABASE_URL where `baton serve`, `api` and `worker` run, e.g. postgresql://postgres@127.0.0.1:5432/baton',
          ),
        ],
        agents: null,
      });
  const redis: Promise<DoctorCheck[]> = config.redisUrl
    ? checkRedis(config.redisUrl, t)
    : Promise.resolve([
        warn(
          'redis',
          'REDIS_URL is not set: not checked',
          'set REDIS_URL where `baton serve`, `api` and `worker` run, e.g. redis://127.0.0.1:6379',
        ),
      ]);
  // Without a database of its own to read, doctor lists the agents through the API.
  const api: Promise<ApiFindings> =
    connection instanceof Error
      ? Promise.resolve({
          checks: [
            warn('api', 'not checked: the profile, which names the API, cannot be read', 'fix the token line'),
            fail('token', reasonOf(connection), 'fix the profile (BATON_PROFILE), or set BATON_TOKEN'),
          ],
          agents: null,
        })
      : checkApi(connection, t, config.databaseUrl === undefined);
  const [pg, rd, ap] = await Promise.all([postgres, redis, api]);
  const checks: DoctorCheck[] = [configCheck(config), ...pg.checks, ...rd, ...ap.checks];
  const agents = pg.agents ?? ap.agents;
  if (agents === null) {
    if (!checks.some((c) => c.name === 'agents')) {
      checks.push(
        warn('agents', 'not listed, so no provider was checked: neither Postgres nor the API could be asked', 'fix the lines above'),
      );
    }
    return checks;
  }
  const from = pg.agents !== null ? `in deployment ${deployment} (Postgres)` : 'that the token may list (API)';
  checks.push(agentsCheck(agents, from));
  checks.push(
    ...(await providerChecks(agents, {
      envs: { codex: config.codex.baseEnv, claude_code: config.claudeCode.baseEnv },
      workerProviders: config.workerProviders,
      timeoutMs: t,
    })),
  );
  return checks;
}
