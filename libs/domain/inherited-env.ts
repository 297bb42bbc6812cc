/*
 * Which of the worker's variables a provider's child processes inherit: the one list, read by
 * the configuration (libs/config, cheaply: plain data, no schema library) and by the adapters
 * that start processes (command, claude_code, codex).
 */

/** What a command program (and claude) gets from the worker: never DATABASE_URL, REDIS_URL or tokens. */
export const PROGRAM_ENV_NAMES = ['PATH', 'HOME', 'USER', 'LOGNAME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TMPDIR'] as const;

/** What `codex app-server` gets: a program's variables, the Codex home, and the network's proxy and CA settings. */
export const CODEX_ENV_NAMES = [
  ...PROGRAM_ENV_NAMES,
  'CODEX_HOME',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'ALL_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'all_proxy',
  'no_proxy',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
] as const;

/** The variables of `env` named in `names` that are set (an empty value counts as unset unless `keepEmpty`). */
export function pickEnv(
  env: Readonly<Record<string, string | undefined>>,
  names: readonly string[],
  keepEmpty = false,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = env[name];
    if (value !== undefined && (keepEmpty || value !== '')) out[name] = value;
  }
  return out;
}
