import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { envValues, type RawEnv } from '../../../libs/adapters/env-settings.ts';
import { locate } from '../../../libs/adapters/codex/daemon-package.ts';
import { pushProviders } from '../../../libs/adapters/provider-specs.ts';
import { VERIFIED_CLI_VERSIONS } from '../../../libs/adapters/verified-versions.ts';
import { fail, ok, reasonOf, warn, type DoctorCheck } from './doctor-check.ts';
import { CLI_DEFAULTS } from '../../../libs/config/component-defaults.ts';

/** An active agent as doctor sees it: where it is registered, its provider and its settings. */
export interface DoctorAgent {
  readonly project: string;
  readonly handle: string;
  readonly provider: string;
  readonly settings: Readonly<Record<string, unknown>>;
}

/** The providers whose turns run a program on the worker's host, and where to get it. */
const PROGRAMS: Readonly<Record<'codex' | 'claude_code', { binary: string; npmPackage: string; verified: string }>> = {
  codex: { binary: 'codex', npmPackage: '@openai/codex', verified: VERIFIED_CLI_VERSIONS.codex },
  claude_code: { binary: 'claude', npmPackage: '@anthropic-ai/claude-code', verified: VERIFIED_CLI_VERSIONS.claude_code },
};

const installCommand = (p: (typeof PROGRAMS)[keyof typeof PROGRAMS]) => `npm install -g ${p.npmPackage}@${p.verified}`;

/** What a worker's programs inherit per provider (BatonConfig.codex.baseEnv, claudeCode.baseEnv). */
export type ProgramEnvs = Readonly<Record<'codex' | 'claude_code', Readonly<Record<string, string>>>>;

const label = (a: DoctorAgent) => `${a.project}/${a.handle}`;

function listAgents(agents: readonly DoctorAgent[]): string {
  const names = agents.map(label);
  return names.length > 5 ? `${names.slice(0, 5).join(', ')} and ${names.length - 5} more` : names.join(', ');
}

/** `<binary> --version`'s first line, or why it gave none within CLI_DEFAULTS.versionTimeoutMs. */
function versionOf(file: string, env: Readonly<Record<string, string>>): Promise<{ version: string } | { error: string }> {
  return new Promise((resolve) => {
    execFile(
      file,
      ['--version'],
      { env: { ...env }, timeout: CLI_DEFAULTS.versionTimeoutMs, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        if (err) {
          const e = err as NodeJS.ErrnoException & { killed?: boolean };
          resolve({
            error: e.killed
              ? `gave no answer within ${CLI_DEFAULTS.versionTimeoutMs} ms`
              : `${reasonOf(err)}${stderr.trim() ? `: ${stderr.trim().split('\n')[0]}` : ''}`,
          });
          return;
        }
        resolve({ version: stdout.trim().split('\n')[0] || '(no version printed)' });
      },
    );
  });
}

async function executable(file: string): Promise<boolean> {
  const isFile = await stat(file).then(
    (s) => s.isFile(),
    () => false,
  );
  return (
    isFile &&
    (await access(file, constants.X_OK).then(
      () => true,
      () => false,
    ))
  );
}

/**
 * The program of every codex and claude_code agent: found (the agent's `binary` setting, else
 * `codex` / `claude` on the PATH its turns get: the agent's env setting's PATH, else the worker's)
 * and answering `--version` (fail otherwise), at the version the adapter was verified with (warn
 * otherwise). One line per distinct program.
 */
async function programChecks(agents: readonly DoctorAgent[], envs: ProgramEnvs): Promise<DoctorCheck[]> {
  const groups = new Map<string, { provider: 'codex' | 'claude_code'; binary: string; path: string | undefined; agents: DoctorAgent[] }>();
  for (const a of agents) {
    if (a.provider !== 'codex' && a.provider !== 'claude_code') continue;
    const binary = typeof a.settings['binary'] === 'string' ? a.settings['binary'] : PROGRAMS[a.provider].binary;
    const path = envValues(a.settings['env'] as RawEnv | undefined)['PATH'] ?? envs[a.provider]['PATH'];
    const key = JSON.stringify([a.provider, binary, path]);
    const group = groups.get(key) ?? { provider: a.provider, binary, path, agents: [] };
    group.agents.push(a);
    groups.set(key, group);
  }
  return Promise.all(
    [...groups.values()].map(async (g): Promise<DoctorCheck> => {
      const name = `${g.provider} ${g.binary}`;
      const program = PROGRAMS[g.provider];
      const who = `for ${listAgents(g.agents)}`;
      const found = await locate(g.binary, g.path);
      if (found === null || !(await executable(found))) {
        const where = g.binary.includes('/')
          ? `${found ?? g.binary} is not an executable file`
          : `\`${g.binary}\` is not on the PATH (${g.path ?? 'unset'})`;
        return fail(
          name,
          `${where}, ${who}`,
          `install it (\`${installCommand(program)}\`) where the worker's PATH finds it, or set the agent's \`binary\` setting to its full path`,
        );
      }
      const answer = await versionOf(found, { ...envs[g.provider], ...(g.path !== undefined ? { PATH: g.path } : {}) });
      if ('error' in answer)
        return fail(
          name,
          `${found} --version failed (${answer.error}), ${who}`,
          `reinstall it (\`${installCommand(program)}\`) and check that \`${found} --version\` works`,
        );
      const version = /\d+\.\d+\.\d+\S*/.exec(answer.version)?.[0];
      if (version !== program.verified) {
        return warn(
          name,
          `${answer.version} at ${found}, ${who}; Baton's adapter was verified with ${program.verified}`,
          `install that version (\`${installCommand(program)}\`), or try this one knowing that Baton reads what ${program.verified} writes`,
        );
      }
      return ok(name, `${answer.version} at ${found}, ${who}`);
    }),
  );
}

/** Whether each webhook agent's `url` answers HTTP at all (any status: doctor sends no turn), within `timeoutMs`. */
async function webhookChecks(agents: readonly DoctorAgent[], timeoutMs: number): Promise<DoctorCheck[]> {
  return Promise.all(
    agents
      .filter((a) => a.provider === 'webhook')
      .map(async (a): Promise<DoctorCheck> => {
        const name = `webhook ${label(a)}`;
        const url = typeof a.settings['url'] === 'string' ? a.settings['url'] : '';
        try {
          const res = await fetch(url, { method: 'GET', redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
          await res.body?.cancel();
          return ok(name, `${url} answers (HTTP ${res.status})`);
        } catch (err) {
          const e = err as Error & { cause?: unknown };
          const reason = e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : reasonOf(e.cause ?? e);
          // Baton retries an unreachable endpoint for BATON_UNREACHABLE_GIVE_UP_MS: a warning, not a failure.
          return warn(
            name,
            `cannot reach ${url} (${reason})`,
            "start the agent's endpoint, or register the agent again with the URL it listens on",
          );
        }
      }),
  );
}

/**
 * Each registered agent's prerequisites on this host: the codex / claude programs and their
 * versions, a webhook URL's reachability, and whether this configuration's workers deliver to
 * every push provider in use (BATON_WORKER_PROVIDERS).
 */
export async function providerChecks(
  agents: readonly DoctorAgent[],
  opts: { envs: ProgramEnvs; workerProviders: readonly string[]; timeoutMs: number },
): Promise<DoctorCheck[]> {
  const push = new Set(pushProviders());
  const unserved = [...new Set(agents.map((a) => a.provider))].filter((p) => push.has(p) && !opts.workerProviders.includes(p)).sort();
  const workers =
    unserved.length === 0
      ? []
      : [
          warn(
            'worker providers',
            `BATON_WORKER_PROVIDERS=${opts.workerProviders.join(',')}: a worker with this configuration delivers no ${unserved.join(', ')} turns, yet ${listAgents(agents.filter((a) => unserved.includes(a.provider)))} use ${unserved.length > 1 ? 'them' : 'it'}`,
            `start the worker that serves them with BATON_WORKER_PROVIDERS=${[...opts.workerProviders, ...unserved].join(',')}`,
          ),
        ];
  const [programs, webhooks] = await Promise.all([programChecks(agents, opts.envs), webhookChecks(agents, opts.timeoutMs)]);
  return [...workers, ...programs, ...webhooks];
}
