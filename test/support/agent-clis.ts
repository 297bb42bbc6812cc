import { accessSync, constants } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { VERIFIED_CLI_VERSIONS } from '../../libs/adapters/verified-versions.ts';

/**
 * Where the real agent CLIs live for the tests: installed by `scripts/install-agent-clis.sh` into
 * a cache outside the repository (`.ci/run` runs it and exports BATON_AGENT_CLIS_DIR), at the versions
 * the adapters were verified with (libs/adapters/verified-versions.ts, held equal to the script's).
 */
export const AGENT_CLI_VERSIONS = { codex: VERIFIED_CLI_VERSIONS.codex, claude: VERIFIED_CLI_VERSIONS.claude_code } as const;

export type AgentCli = keyof typeof AGENT_CLI_VERSIONS;

/** The install directory: BATON_AGENT_CLIS_DIR, else the script's default. */
export function agentClisDir(env: NodeJS.ProcessEnv = process.env): string {
  const given = env['BATON_AGENT_CLIS_DIR'];
  if (given) return given;
  const cache = env['XDG_CACHE_HOME'] || join(env['HOME'] || homedir(), '.cache');
  return join(cache, 'baton', 'agent-clis', `codex-${AGENT_CLI_VERSIONS.codex}_claude-code-${AGENT_CLI_VERSIONS.claude}`);
}

/**
 * The absolute path of a real agent CLI.
 * @throws Error naming the install script when it is missing: tests that need a real CLI fail
 *   (never skip) on a machine without it.
 */
export function agentCli(name: AgentCli): string {
  const path = join(agentClisDir(), 'node_modules', '.bin', name);
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(
      `the real ${name} CLI (${name === 'codex' ? '@openai/codex' : '@anthropic-ai/claude-code'}@${AGENT_CLI_VERSIONS[name]}) is not installed at ${path}: ` +
        'run scripts/install-agent-clis.sh (or set BATON_AGENT_CLIS_DIR to where it installed them)',
    );
  }
  return path;
}
