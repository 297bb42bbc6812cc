import { Option, type Command } from 'commander';
import { UsageError, type CliContext } from '../cli-context.ts';
import { relativeTime, timeText } from '../format.ts';
import { renderTable, type Column } from '../table.ts';

/**
 * The providers an agent can be registered for (each has a spec and, if it pushes, an
 * adapter). The specs compile their settings schemas when loaded, which costs a few hundred
 * milliseconds: they are loaded only when an `agent` subcommand runs (or shows its help), not
 * by every CLI call.
 */
async function providerNames(): Promise<string[]> {
  const { PROVIDER_SPECS } = await import('../../../libs/adapters/provider-specs.ts');
  return [...PROVIDER_SPECS.keys()];
}

interface AgentJson {
  id: string;
  displayName: string;
  provider: string;
  target: string | null;
  pool: string;
  settings: Record<string, unknown>;
  deployment?: string;
  roles?: string[];
  generation?: number;
  createdAt: string;
  updatedAt?: string;
}

const AGENT_COLUMNS: readonly Column<AgentJson>[] = [
  { header: 'ID', value: (a) => a.id },
  { header: 'PROVIDER', value: (a) => a.provider },
  { header: 'NAME', value: (a) => a.displayName, max: 30 },
  { header: 'TARGET', value: (a) => a.target ?? '', max: 40 },
  { header: 'POOL', value: (a) => a.pool },
  { header: 'ROLES', value: (a) => (a.roles ?? []).join(','), max: 30 },
  { header: 'ADDED', value: (a) => relativeTime(a.createdAt) },
];

/** One agent, a field a line; settings as the API shows them (secrets already left out). */
function agentDetail(a: AgentJson): string {
  const lines = [
    `agent ${a.id}`,
    `  name        ${a.displayName}`,
    `  provider    ${a.provider}`,
    `  target      ${a.target ?? '(the id)'}`,
    `  pool        ${a.pool}`,
    `  roles       ${a.roles && a.roles.length > 0 ? a.roles.join(', ') : '(none)'}`,
  ];
  if (a.deployment !== undefined) lines.push(`  deployment  ${a.deployment}`);
  if (a.generation !== undefined) lines.push(`  generation  ${a.generation}`);
  lines.push(`  added       ${timeText(a.createdAt)}`);
  if (a.updatedAt !== undefined && a.updatedAt !== a.createdAt) lines.push(`  changed     ${timeText(a.updatedAt)}`);
  lines.push(`  settings    ${Object.keys(a.settings).length > 0 ? JSON.stringify(a.settings) : '(none)'}`);
  return lines.join('\n');
}

/** ", roles a, b" when the agent declares any. */
function rolesText(a: AgentJson): string {
  return a.roles && a.roles.length > 0 ? `, roles ${a.roles.join(', ')}` : '';
}

/** One `--skill` value: a JSON object (the API checks its fields: invalid_agent_card). */
function skillOption(value: string): unknown {
  let skill: unknown;
  try {
    skill = JSON.parse(value);
  } catch {
    throw new UsageError('--skill must be a JSON object, e.g. {"id":"review","name":"Code review"}');
  }
  if (typeof skill !== 'object' || skill === null || Array.isArray(skill)) throw new UsageError('--skill must be a JSON object');
  return skill;
}

/** `--role NAME`, repeatable: the names in the order given (the API checks them: invalid_role). */
const collectRole = (v: string, all: string[]): string[] => [...all, v];
const ROLE_HELP = 'a role it declares, e.g. reviewer (repeatable; letters, digits, - and _; case-insensitive)';

/** `baton agent add|list|show|update|remove` */
export function registerAgentCommands(program: Command, ctx: CliContext): void {
  const agent = program.command('agent').description('register, list, show, update and remove agents');
  const providerOption = new Option('--provider <provider>', 'the provider (settings of each: libs/adapters/README.md)').default('demo');
  let providers: string[] = [];
  agent.hook('preSubcommand', async () => {
    providers = await providerNames();
    providerOption.description = `one of ${providers.join(', ')} (settings of each: libs/adapters/README.md)`;
  });

  agent
    .command('add')
    .description('register an agent')
    .argument('<id>', 'agent id, unique in the project (case-insensitive)')
    .addOption(providerOption)
    .option('--name <displayName>', 'display name')
    .option('--target <target>', 'session or endpoint turns are delivered to (default: the id)')
    .option('--settings <json>', 'provider settings as a JSON object, e.g. {"thinkMs":500}; secrets in it are never shown again')
    .option('--pool <pool>', 'worker pool (host affinity): only workers started with it in BATON_WORKER_POOLS deliver to this agent')
    .option('--role <name>', ROLE_HELP, collectRole, [] as string[])
    .option('--description <text>', "what the agent's A2A card says of it")
    .option(
      '--skill <json>',
      'a skill on its A2A card, as JSON: {"id":"review","name":"Code review","description":"…","tags":["code"],"examples":["…"]} (repeatable)',
      (v: string, all: unknown[]) => [...all, skillOption(v)],
      [] as unknown[],
    )
    .option('--json', 'print JSON')
    .action(
      async (
        id: string,
        opts: {
          provider: string;
          name?: string;
          target?: string;
          settings?: string;
          pool?: string;
          role: string[];
          description?: string;
          skill: unknown[];
          json?: boolean;
        },
        cmd: Command,
      ) => {
        if (!providers.includes(opts.provider)) {
          throw new UsageError(`--provider must be one of ${providers.join(', ')}`);
        }
        let settings: unknown;
        if (opts.settings !== undefined) {
          try {
            settings = JSON.parse(opts.settings);
          } catch {
            throw new UsageError('--settings must be a JSON object');
          }
          if (typeof settings !== 'object' || settings === null || Array.isArray(settings))
            throw new UsageError('--settings must be a JSON object');
        }
        const { body } = await ctx.client(cmd).post<AgentJson>('/v1/agents', {
          id,
          provider: opts.provider,
          ...(opts.name ? { displayName: opts.name } : {}),
          ...(opts.target ? { target: opts.target } : {}),
          ...(settings ? { settings } : {}),
          ...(opts.pool ? { pool: opts.pool } : {}),
          ...(opts.role.length > 0 ? { roles: opts.role } : {}),
          ...(opts.description !== undefined ? { description: opts.description } : {}),
          ...(opts.skill.length > 0 ? { skills: opts.skill } : {}),
        });
        if (opts.json) ctx.json(body);
        else
          ctx.out(
            `added ${body.id} (${body.provider}${body.target ? `, delivers to ${body.target}` : ''}${body.pool !== 'default' ? `, pool ${body.pool}` : ''}${rolesText(body)})`,
          );
      },
    );

  agent
    .command('list')
    .description('list the active agents of the project')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const { items } = await ctx.client(cmd).get<{ items: AgentJson[] }>('/v1/agents');
      if (opts.json) return ctx.json(items);
      if (items.length === 0) return ctx.out('no agents');
      for (const line of renderTable(AGENT_COLUMNS, items, { colour: ctx.colour() })) ctx.out(line);
    });

  agent
    .command('show')
    .description('one agent: provider, target, pool, deployment and settings (secrets never shown)')
    .argument('<id>', 'agent id')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      const a = await ctx.client(cmd).get<AgentJson>(`/v1/agents/${encodeURIComponent(id)}`);
      if (opts.json) return ctx.json(a);
      ctx.out(agentDetail(a));
    });

  agent
    .command('update')
    .description('change what an agent declares: its roles (--role replaces them all, --clear-roles removes them)')
    .argument('<id>', 'agent id')
    .option('--role <name>', `${ROLE_HELP}; the agent's roles become exactly these`, collectRole, [] as string[])
    .option('--clear-roles', 'remove every role')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { role: string[]; clearRoles?: boolean; json?: boolean }, cmd: Command) => {
      if (opts.clearRoles && opts.role.length > 0) throw new UsageError('--role and --clear-roles cannot be used together');
      if (!opts.clearRoles && opts.role.length === 0)
        throw new UsageError('nothing to update: give --role NAME (repeatable) or --clear-roles');
      const { body } = await ctx
        .client(cmd)
        .request<AgentJson>('PATCH', `/v1/agents/${encodeURIComponent(id)}`, { roles: opts.clearRoles ? [] : opts.role });
      if (opts.json) return ctx.json(body);
      ctx.out(`updated ${body.id}: ${body.roles && body.roles.length > 0 ? `roles ${body.roles.join(', ')}` : 'no roles'}`);
    });

  agent
    .command('remove')
    .description(
      'remove an agent (its open handoffs become UNAVAILABLE, never redirected; its tokens end for good, also if the id is added again)',
    )
    .argument('<id>', 'agent id')
    .option('--json', 'print JSON: { removed }')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      await ctx.client(cmd).delete(`/v1/agents/${encodeURIComponent(id)}`);
      if (opts.json) return ctx.json({ removed: id.toLowerCase() });
      ctx.out(`removed ${id.toLowerCase()}`);
    });
}
