import { resolve } from 'node:path';
import { Option, type Command } from 'commander';
import { BatonError } from '../../../libs/domain/errors.ts';
import { UsageError, type CliContext } from '../cli-context.ts';
import { BATON_BIN } from '../../../libs/processes/package-files.ts';
import type { McpIdentity } from '../../../libs/mcp/tool-context.ts';
import type { TokenOwner } from '../../../libs/mcp/resolve-identity.ts';

/**
 * The identity a `baton mcp` session is fixed to, from the token the CLI would use (BATON_TOKEN
 * or the profile): its own agent, or for an admin token the agent named with --as or
 * BATON_AGENT (which must exist). An admin token naming none, or an agent token naming
 * another agent, is a usage error (exit 2); a refused token exits 1 with its code.
 */
async function sessionIdentity(ctx: CliContext, cmd: Command, named: string | undefined): Promise<McpIdentity> {
  const { resolveIdentity } = await import('../../../libs/mcp/resolve-identity.ts');
  const client = ctx.client(cmd);
  const owner = await client.get<TokenOwner>('/v1/whoami');
  let identity: McpIdentity;
  try {
    identity = resolveIdentity(owner, ctx.as(named), { nameWith: '--as <agent> (or BATON_AGENT)' });
  } catch (err) {
    if (err instanceof BatonError) throw new UsageError(`baton mcp: ${err.message}`);
    throw err;
  }
  // An admin's named agent must exist now, not at the first tool call (agent_not_found, exit 1).
  if (identity.admin) await client.get(`/v1/agents/${encodeURIComponent(identity.agent)}`);
  return identity;
}

/** `baton mcp` (a stdio MCP server for one agent) and `baton mcp config` (a client's snippet). */
export function registerMcpCommands(program: Command, ctx: CliContext): void {
  const mcp = program
    .command('mcp')
    .description("serve Baton's tools to an agent session over MCP on stdio, as the token's agent (BATON_TOKEN or the profile)")
    .option('--as <agent>', 'admin token only: the agent the session acts as (default BATON_AGENT); an agent token is its own agent')
    .action(async (opts: { as?: string }, cmd: Command) => {
      const identity = await sessionIdentity(ctx, cmd, opts.as);
      const { serveStdio } = await import('../../../libs/mcp/serve-stdio.ts');
      const conn = ctx.connection(cmd);
      // stdout is the MCP channel: people's lines go to stderr.
      ctx.note(`baton mcp: serving as ${identity.agent} in project ${identity.project} (Baton at ${conn.url})`);
      const { toolContext } = await import('../../../libs/mcp/tool-context.ts');
      await serveStdio(toolContext(ctx.client(cmd), identity));
    });

  mcp
    .command('config')
    .description("print the snippet that loads Baton's MCP server into an agent client, for the token in use")
    .addOption(new Option('--client <client>', 'the MCP client').choices(['claude', 'codex', 'cursor']).makeOptionMandatory())
    .option(
      '--http',
      "the API's streamable HTTP endpoint (/mcp) with the token in the Authorization header, instead of a `baton mcp` process",
    )
    .option('--as <agent>', 'admin token only: the agent the session acts as (default BATON_AGENT)')
    .option('--name <name>', 'the server name in the client (tools appear as mcp__<name>__send in Claude Code)', 'baton')
    .option('--json', 'print JSON: { client, transport, agent, project, file, snippet } (the snippet as text)')
    .action(
      async (opts: { client: 'claude' | 'codex' | 'cursor'; http?: boolean; as?: string; name: string; json?: boolean }, cmd: Command) => {
        if (!/^[A-Za-z0-9_-]{1,64}$/.test(opts.name)) throw new UsageError('--name must be 1 to 64 letters, digits, _ or -');
        const { mcpClientConfig, CONFIG_HOME } = await import('../../../libs/mcp/client-config.ts');
        // `mcp --as` and `mcp config --as` are one option: commander hands it to the parent.
        const identity = await sessionIdentity(ctx, cmd, opts.as ?? cmd.optsWithGlobals<{ as?: string }>().as);
        const conn = ctx.connection(cmd);
        const project = identity.admin ? conn.project : undefined;
        const launch = opts.http
          ? {
              transport: 'http' as const,
              url: `${conn.url.replace(/\/+$/, '')}/mcp`,
              headers: {
                Authorization: `Bearer ${conn.token}`,
                ...(identity.admin ? { 'X-Baton-Agent': identity.agent } : {}),
                ...(project ? { 'X-Baton-Project': project } : {}),
              },
            }
          : {
              transport: 'stdio' as const,
              command: process.execPath,
              args: [BATON_BIN, 'mcp'],
              env: {
                BATON_URL: conn.url,
                // A token from a profile stays in the profile (0600); one from the environment has no other home.
                ...(conn.tokenFrom === 'env' ? { BATON_TOKEN: conn.token ?? '' } : { BATON_PROFILE: resolve(conn.profilePath) }),
                ...(project ? { BATON_PROJECT: project } : {}),
                ...(identity.admin ? { BATON_AGENT: identity.agent } : {}),
              },
            };
        const holdsToken = opts.http === true || conn.tokenFrom === 'env';
        const snippet = mcpClientConfig(opts.client, launch, opts.name).trimEnd();
        if (opts.json) {
          ctx.json({
            client: opts.client,
            transport: launch.transport,
            agent: identity.agent,
            project: identity.project,
            file: CONFIG_HOME[opts.client],
            holdsToken,
            snippet,
          });
          return;
        }
        ctx.out(snippet);
        ctx.note(
          `# ${opts.client}: put this in ${CONFIG_HOME[opts.client]}; the session acts as ${identity.agent} in project ${identity.project}`,
        );
        if (opts.client === 'claude')
          ctx.note(
            `# claude -p runs a tool only when allowed: --allowedTools mcp__${opts.name} (all of Baton's tools) or mcp__${opts.name}__send,...`,
          );
        if (holdsToken) ctx.note('# this snippet holds the token: keep the file it goes in private (chmod 600), never in version control');
      },
    );
}
