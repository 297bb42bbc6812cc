import type { Command } from 'commander';
import { positiveInt, UsageError, type CliContext } from '../cli-context.ts';
import { writeProfile } from '../profile.ts';
import { localTime, relativeTime } from '../format.ts';
import { renderTable, type Column } from '../table.ts';

interface TokenJson {
  id: string;
  name: string;
  admin: boolean;
  project: string | null;
  agent: string | null;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

interface AuditJson {
  seq: string;
  tokenId: string;
  project: string | null;
  method: string;
  route: string;
  params: Record<string, unknown> | null;
  status: number;
  at: string;
}

/** Whom a token acts as: `admin`, or `agent@project`. */
const holderOf = (t: TokenJson) => (t.admin ? 'admin' : `${t.agent}@${t.project}`);

const TOKEN_COLUMNS: readonly Column<TokenJson>[] = [
  { header: 'ID', value: (t) => t.id },
  { header: 'FOR', value: holderOf, max: 40 },
  // A token's default name is its holder: shown once, under FOR.
  { header: 'NAME', value: (t) => (t.name === holderOf(t) ? '' : t.name), max: 30 },
  { header: 'CREATED', value: (t) => relativeTime(t.createdAt) },
  { header: 'LAST USED', value: (t) => (t.lastUsedAt ? relativeTime(t.lastUsedAt) : 'never') },
  { header: 'REVOKED', value: (t) => (t.revokedAt ? relativeTime(t.revokedAt) : '') },
];

/** Audit rows with the name of the token that acted (its id when the token is unknown). */
function auditColumns(tokenNames: ReadonlyMap<string, string>): Column<AuditJson>[] {
  return [
    { header: 'WHEN', value: (a) => localTime(a.at) },
    { header: 'TOKEN', value: (a) => tokenNames.get(a.tokenId) ?? a.tokenId, max: 30 },
    { header: 'METHOD', value: (a) => a.method },
    { header: 'ROUTE', value: (a) => a.route, max: 50 },
    { header: 'STATUS', value: (a) => String(a.status) },
    { header: 'PROJECT', value: (a) => a.project ?? '' },
    { header: 'PARAMS', value: (a) => (Object.keys(a.params ?? {}).length > 0 ? JSON.stringify(a.params) : ''), max: 60 },
  ];
}

/** `init`, `token create|list|revoke`, `project create|list`, `whoami`: who may do what. */
export function registerIdentityCommands(program: Command, ctx: CliContext): void {
  program
    .command('init')
    .description('prepare the database and write an admin token to BATON_HOME/admin.token (mode 0600), with a CLI profile that uses it')
    .option('--force', 'create a new admin token even if the one on file works (and rewrite the profile)')
    .option('--print', 'also print the admin token (for scripts; it is shown only this once)')
    .option('--json', 'print JSON: { created, path, profilePath, token? } (token only with --print)')
    .action(async (opts: { force?: boolean; print?: boolean; json?: boolean }) => {
      const config = ctx.config();
      if (!config.databaseUrl) throw new UsageError('DATABASE_URL is not set: init writes to the database (it runs where the API runs)');
      const { migrate } = await import('../../../libs/db/migrate.ts');
      const { openDatabase } = await import('../../../libs/db/open-database.ts');
      const { createRepositories } = await import('../../../libs/db/repositories.ts');
      const { createLogger } = await import('../../../libs/logging/create-logger.ts');
      const { systemClock } = await import('../../../libs/domain/clock.ts');
      const { initAdminToken } = await import('../admin-token.ts');
      const logger = createLogger({ level: 'warn', name: 'baton-init' });
      const { isPostgresFailure, postgresStartupError } = await import('../startup-error.ts');
      const url = config.databaseUrl;
      await migrate(url).catch((err: unknown) => {
        throw isPostgresFailure(err) ? postgresStartupError(err, url) : err;
      });
      const db = openDatabase({ url: config.databaseUrl, poolSize: 2, logger, applicationName: `baton-init-${process.pid}` });
      try {
        const r = await initAdminToken({ ...createRepositories(db), clock: systemClock, logger }, config, opts.force === true);
        if (opts.json)
          return ctx.json({
            created: r.created,
            path: r.path,
            profilePath: r.profilePath,
            ...(opts.print && r.token ? { token: r.token } : {}),
          });
        // With --print, stdout is the token alone and the rest goes to stderr.
        const say = opts.print ? ctx.note : ctx.out;
        say(r.created ? `admin token written to ${r.path} (mode 0600)` : `already initialised: ${r.path} holds a working admin token`);
        say(`the CLI reads it through ${r.profilePath} (or set BATON_TOKEN)`);
        if (opts.print && r.token) ctx.out(r.token);
      } finally {
        await db.close();
      }
    });

  const token = program.command('token').description('bearer tokens: one per agent and project, shown once, stored as a hash');
  token
    .command('generate')
    .description('print a new random token secret, offline (for BATON_ADMIN_TOKEN: `baton db migrate` registers it as an admin token)')
    .action(async () => {
      const { newSecret } = await import('../../../libs/handoffs/manage-tokens.ts');
      ctx.out(newSecret());
    });
  token
    .command('create')
    .description('create a token for an agent (prints it once); --admin for another admin token')
    .option('--agent <id>', 'the agent the token acts as')
    .option('--admin', 'an admin token (any project, every operation)')
    .option('--name <name>', 'a label for listings')
    .option('--profile <path>', 'also write a CLI profile with this token to PATH (mode 0600)')
    .option('--json', 'print JSON')
    .action(async (opts: { agent?: string; admin?: boolean; name?: string; profile?: string; json?: boolean }, cmd: Command) => {
      if (!opts.agent === !opts.admin) throw new UsageError('give --agent ID, or --admin');
      // The agent's project is the current one (--project, BATON_PROJECT, the profile, or default).
      const { body } = await ctx.client(cmd).post<{ token: string; record: TokenJson }>('/v1/tokens', {
        ...(opts.admin ? { admin: true } : { agent: opts.agent }),
        ...(opts.name ? { name: opts.name } : {}),
      });
      if (opts.profile) {
        const url = cmd.optsWithGlobals<{ url?: string }>().url ?? ctx.config().api.publicUrl;
        writeProfile(opts.profile, { url, token: body.token, ...(body.record.project ? { project: body.record.project } : {}) });
      }
      if (opts.json) return ctx.json(body);
      // stdout is the token alone (TOKEN=$(baton token create ...)); the rest is for people.
      ctx.out(body.token);
      ctx.note(
        `token ${body.record.id} for ${body.record.admin ? 'admin' : `${body.record.agent} in project ${body.record.project}`}: shown only this once${opts.profile ? `; profile written to ${opts.profile}` : ''}`,
      );
    });

  token
    .command('list')
    .description('tokens (never their secrets), oldest first')
    .option('--all', 'every project (default: the current project)')
    .option('--json', 'print JSON')
    .action(async (opts: { all?: boolean; json?: boolean }, cmd: Command) => {
      const { items } = await ctx.client(cmd).get<{ items: TokenJson[] }>(`/v1/tokens${opts.all ? '?all=true' : ''}`);
      if (opts.json) return ctx.json(items);
      if (items.length === 0) return ctx.out('no tokens');
      for (const line of renderTable(TOKEN_COLUMNS, items, { colour: ctx.colour() })) ctx.out(line);
    });

  token
    .command('revoke')
    .description('revoke a token: it is refused from the next request on')
    .argument('<id>', 'token id (from token list)')
    .option('--json', 'print JSON: { revoked }')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      await ctx.client(cmd).delete(`/v1/tokens/${encodeURIComponent(id)}`);
      if (opts.json) return ctx.json({ revoked: id });
      ctx.out(`revoked ${id}`);
    });

  const project = program.command('project').description('projects: each scopes its own agents, handoffs, sessions and tokens');
  project
    .command('create')
    .description('create a project (admin)')
    .argument('<id>', 'project id')
    .option('--name <name>', 'display name')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { name?: string; json?: boolean }, cmd: Command) => {
      const { body } = await ctx.client(cmd).post<{ id: string }>('/v1/projects', { id, ...(opts.name ? { name: opts.name } : {}) });
      if (opts.json) return ctx.json(body);
      ctx.out(`created project ${body.id}`);
    });
  project
    .command('list')
    .description('projects this token may see')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const { items } = await ctx.client(cmd).get<{ items: Array<{ id: string; name: string }> }>('/v1/projects');
      if (opts.json) return ctx.json(items);
      if (items.length === 0) return ctx.out('no projects');
      for (const line of renderTable<{ id: string; name: string }>(
        [
          { header: 'ID', value: (p) => p.id },
          { header: 'NAME', value: (p) => p.name, max: 60 },
        ],
        items,
        { colour: ctx.colour() },
      ))
        ctx.out(line);
    });

  program
    .command('audit')
    .description('admin: who changed agents, tokens, projects, settings, connections, sessions and facts, newest first')
    .option('--token <tokenId>', 'only what this token did (an id from token list)')
    .option('--limit <n>', 'entries', positiveInt('--limit', 999), 100)
    .option('--json', 'print JSON')
    .action(async (opts: { token?: string; limit: number; json?: boolean }, cmd: Command) => {
      const q = new URLSearchParams({ limit: String(opts.limit) });
      if (opts.token) q.set('token', opts.token);
      const client = ctx.client(cmd);
      const { items } = await client.get<{ items: AuditJson[] }>(`/v1/audit?${q}`);
      if (opts.json) return ctx.json(items);
      if (items.length === 0) return ctx.out('no audit entries');
      // The audit records token ids; people read token names.
      const tokens = await client.get<{ items: TokenJson[] }>('/v1/tokens?all=true');
      const names = new Map(tokens.items.map((t) => [t.id, t.name] as const));
      for (const line of renderTable(auditColumns(names), items, { colour: ctx.colour() })) ctx.out(line);
    });

  program
    .command('whoami')
    .description('who the token in use is: its agent (or admin) and project')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const me = await ctx.client(cmd).get<{ tokenId: string; admin: boolean; agent: string | null; project: string }>('/v1/whoami');
      if (opts.json) return ctx.json(me);
      ctx.out(`${me.admin ? 'admin' : me.agent} in project ${me.project} (token ${me.tokenId})`);
    });
}
