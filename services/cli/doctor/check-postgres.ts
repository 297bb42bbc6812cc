import pg from 'pg';
import { readMigrations, type Migration } from '../../../libs/db/migrate.ts';
import { createdbCommand, describeUrl, UNREACHABLE } from '../startup-error.ts';
import { fail, ok, reasonOf, warn, within, type DoctorCheck } from './doctor-check.ts';
import type { DoctorAgent } from './provider-checks.ts';

/** What `checkPostgres` found: its lines, and the deployment's agents when the database could be read. */
export interface PostgresFindings {
  readonly checks: DoctorCheck[];
  /** null: not read (Postgres unreachable or not fully migrated). */
  readonly agents: DoctorAgent[] | null;
}

/** The README's requirement ("Postgres 15+"): older servers are not tested. */
const MIN_POSTGRES_MAJOR = 15;

/** The active agents of one deployment, over every project (the ones its workers serve). */
const AGENTS_SQL = `
  SELECT p.slug AS project, a.handle, a.provider::text AS provider, a.provider_settings AS settings
  FROM agents a JOIN projects p ON p.id = a.project_id
  WHERE a.removed_at IS NULL AND a.deployment = $1
  ORDER BY p.slug, a.handle`;

function connectFailure(err: unknown, url: string, timeoutMs: number): DoctorCheck {
  const where = describeUrl(url);
  const code = (err as { code?: string })?.code;
  if (code === '3D000') {
    const { dbName, command } = createdbCommand(url);
    return fail('postgres', `database "${dbName}" does not exist at ${where}`, `create it with \`${command}\`, then \`baton db migrate\``);
  }
  if (code === '28P01' || code === '28000')
    return fail('postgres', `Postgres at ${where} refused the login: ${reasonOf(err)}`, 'check the user and password in DATABASE_URL');
  if (code && UNREACHABLE.has(code))
    return fail('postgres', `cannot reach Postgres at ${where} (${code})`, 'start Postgres, or point DATABASE_URL at a running one');
  if (/timeout/i.test(reasonOf(err)))
    return fail(
      'postgres',
      `Postgres at ${where} gave no answer within ${timeoutMs} ms`,
      'check that the host in DATABASE_URL is up and that no firewall drops the connection',
    );
  return fail('postgres', `Postgres at ${where} failed: ${reasonOf(err)}`, 'check DATABASE_URL and the Postgres log');
}

/** Compares what `baton_migrations` records with the migrations this Baton carries. */
function migrationsCheck(applied: ReadonlyMap<string, string> | null, known: readonly Migration[]): DoctorCheck {
  const name = 'migrations';
  if (applied === null || applied.size === 0) {
    return fail(
      name,
      `none of the ${known.length} migrations is applied (an empty database)`,
      'run `baton db migrate` (`baton serve`, `api` and `worker` also migrate at start)',
    );
  }
  const changed = known.filter((m) => applied.has(m.name) && applied.get(m.name) !== m.checksum).map((m) => m.name);
  if (changed.length > 0) {
    return fail(
      name,
      `${changed.join(', ')} changed after being applied`,
      'restore prisma/migrations as released (a change goes into a new migration)',
    );
  }
  const missing = known.filter((m) => !applied.has(m.name)).map((m) => m.name);
  if (missing.length > 0) {
    return fail(
      name,
      `${known.length - missing.length} of ${known.length} migrations applied; missing ${missing.join(', ')}`,
      'run `baton db migrate` (`baton serve`, `api` and `worker` also migrate at start)',
    );
  }
  const knownNames = new Set(known.map((m) => m.name));
  const unknown = [...applied.keys()].filter((n) => !knownNames.has(n)).sort();
  if (unknown.length > 0) {
    return warn(
      name,
      `all ${known.length} migrations applied, and ${unknown.length} this Baton does not know (${unknown.join(', ')})`,
      'a newer Baton migrated this database: run that version',
    );
  }
  return ok(name, `all ${known.length} migrations applied`);
}

/**
 * Postgres at `url`: reachable, its version, the migrations applied against prisma/migrations,
 * and the agents of `deployment`. Every step is bounded by `timeoutMs` (connect, each query).
 */
export async function checkPostgres(url: string, deployment: string, timeoutMs: number): Promise<PostgresFindings> {
  const client = new pg.Client({
    connectionString: url,
    application_name: 'baton-doctor',
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  // A connection that ends between queries would otherwise be an unhandled 'error' event.
  client.on('error', () => undefined);
  try {
    await within(client.connect(), timeoutMs + 500, 'Postgres');
  } catch (err) {
    // The connect failure is the result; ending a connection that never opened can fail too.
    void client.end().catch(() => undefined);
    return { checks: [connectFailure(err, url, timeoutMs)], agents: null };
  }
  try {
    const where = describeUrl(url);
    const version = (await client.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version ?? 'unknown';
    const major = Number.parseInt(version, 10);
    const server =
      major >= MIN_POSTGRES_MAJOR
        ? ok('postgres', `PostgreSQL ${version} at ${where}`)
        : warn(
            'postgres',
            `PostgreSQL ${version} at ${where}, older than the ${MIN_POSTGRES_MAJOR} Baton is tested with`,
            `upgrade Postgres to ${MIN_POSTGRES_MAJOR} or later`,
          );
    const known = await readMigrations();
    const table = (await client.query<{ t: string | null }>("SELECT to_regclass('baton_migrations')::text AS t")).rows[0]?.t ?? null;
    const applied =
      table === null
        ? null
        : new Map(
            (await client.query<{ name: string; checksum: string }>('SELECT name, checksum FROM baton_migrations')).rows.map((r) => [
              r.name,
              r.checksum,
            ]),
          );
    const migrations = migrationsCheck(applied, known);
    if (migrations.status === 'fail') return { checks: [server, migrations], agents: null };
    const rows = (await client.query<{ project: string; handle: string; provider: string; settings: unknown }>(AGENTS_SQL, [deployment]))
      .rows;
    const agents = rows.map((r) => ({
      project: r.project,
      handle: r.handle,
      provider: r.provider,
      settings: typeof r.settings === 'object' && r.settings !== null ? (r.settings as Record<string, unknown>) : {},
    }));
    return { checks: [server, migrations], agents };
  } catch (err) {
    return {
      checks: [
        fail(
          'postgres',
          `a query on ${describeUrl(url)} failed: ${reasonOf(err)}`,
          'check the Postgres log; is the database the one Baton migrated?',
        ),
      ],
      agents: null,
    };
  } finally {
    // The checks above are the result; a failed end has nothing left to close.
    await client.end().catch(() => undefined);
  }
}
