import { createHash } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Which agent `env` a Codex home's daemon was started with. One daemon runs a home's turns and
 * keeps the environment it was started with, so an agent's `env` setting reaches its turns only
 * through the daemon's start. Baton records, beside the daemon's own files, the fingerprint of the
 * `env` it started the daemon with (a SHA-256 over the sorted names and values: no value is
 * written) and that daemon's pid, so a worker can tell whether a running daemon has the `env` its
 * agent needs. A daemon Baton did not start (the user's, an older Baton's) has no record that
 * matches its pid: its `env` is unknown.
 */
export const daemonEnvFile = (codexHome: string): string => join(codexHome, 'baton-daemon-env.json');

/** The fingerprint of an agent's `env` (its variables over the worker's base environment). */
export function envFingerprint(env: Readonly<Record<string, string>>): string {
  const pairs = Object.keys(env)
    .sort()
    .map((name) => [name, env[name]]);
  return createHash('sha256').update(JSON.stringify(pairs)).digest('hex');
}

export const EMPTY_ENV_FINGERPRINT = envFingerprint({});

export interface DaemonEnvRecord {
  readonly pid: number;
  readonly fingerprint: string;
  /** The variable names (never their values), for a person reading the file. */
  readonly names: readonly string[];
}

/** Records the `env` of the daemon this worker just started (write, then rename). */
export async function recordDaemonEnv(codexHome: string, pid: number, env: Readonly<Record<string, string>>): Promise<void> {
  const file = daemonEnvFile(codexHome);
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  const record: DaemonEnvRecord = { pid, fingerprint: envFingerprint(env), names: Object.keys(env).sort() };
  await writeFile(tmp, `${JSON.stringify(record)}\n`, { mode: 0o600 });
  await rename(tmp, file);
}

/** The pid in the daemon's own pid file (`app-server-daemon/daemon.pid`, @openai/codex 0.171.0), or null. */
async function daemonPid(codexHome: string): Promise<number | null> {
  try {
    const pid = (JSON.parse(await readFile(join(codexHome, 'app-server-daemon', 'daemon.pid'), 'utf8')) as { pid?: unknown }).pid;
    return typeof pid === 'number' ? pid : null;
  } catch {
    return null;
  }
}

/** The fingerprint of the running daemon's `env`, or null when Baton has no record of it (unknown). */
export async function runningDaemonEnv(codexHome: string): Promise<string | null> {
  const [pid, record] = await Promise.all([
    daemonPid(codexHome),
    readFile(daemonEnvFile(codexHome), 'utf8').then(
      (t) => JSON.parse(t) as Partial<DaemonEnvRecord>,
      () => null,
    ),
  ]);
  return pid !== null && record?.pid === pid && typeof record.fingerprint === 'string' ? record.fingerprint : null;
}

/**
 * Whether a daemon whose `env` is `running` (null: unknown) serves an agent whose `env` has
 * fingerprint `wanted`: the same fingerprint, or an unknown one for an agent with no `env` (a
 * daemon the user started keeps serving agents that ask for nothing of their own).
 */
export function daemonEnvServes(running: string | null, wanted: string): boolean {
  return running === wanted || (running === null && wanted === EMPTY_ENV_FINGERPRINT);
}
