import { spawn } from 'node:child_process';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { recordDaemonEnv, runningDaemonEnv } from './daemon-env.ts';
import { ensureDaemonPackage, type DaemonPackageOutcome } from './daemon-package.ts';

export interface DaemonOptions {
  readonly binary: string;
  readonly codexHome: string;
  /** The daemon keeps the environment of the process that started it (the first worker's). */
  readonly env: Readonly<Record<string, string>>;
  /**
   * The agent's `env` setting: over `env` when this call starts the daemon, and recorded
   * (daemon-env.ts) as the daemon's. Default: none.
   */
  readonly agentEnv?: Readonly<Record<string, string>>;
}

/** What `codex app-server daemon start` answered (one JSON object on stdout). */
export interface DaemonStatus {
  readonly status: string;
  readonly socketPath: string;
  readonly pid?: number;
  readonly appServerVersion?: string;
}

/** A running daemon as this worker found or started it. */
export interface RunningDaemon extends DaemonStatus {
  /** The fingerprint of the agent `env` it runs with (daemon-env.ts), or null when unknown. */
  readonly envFingerprint: string | null;
  /** What became of the home's daemon package before the start (daemon-package.ts). */
  readonly package: DaemonPackageOutcome;
}

/** `<codexHome>/app-server-daemon/settings.json`, the daemon's own launch settings (@openai/codex 0.171.0). */
export const daemonSettingsFile = (codexHome: string): string => join(codexHome, 'app-server-daemon', 'settings.json');

/**
 * Makes sure the daemon of this Codex home will not update itself. Left alone, `daemon start`
 * also launches a detached `pid-update-loop` that, five minutes later and then hourly, downloads
 * https://chatgpt.com/codex/install.sh, runs it, and restarts the app-server onto the new build:
 * egress, code Baton never pinned, and running turns cut off. `updater.autoUpdateEnabled: false`
 * in the daemon's settings stops that loop from being started. A value the user set explicitly
 * is kept (their home, their choice); an unreadable file is left for Codex to report.
 */
export async function keepDaemonUpdaterOff(codexHome: string): Promise<void> {
  const file = daemonSettingsFile(codexHome);
  let settings: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(await readFile(file, 'utf8'));
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return;
    settings = parsed as Record<string, unknown>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return;
  }
  const updater = settings['updater'];
  if (updater !== null && typeof updater === 'object' && typeof (updater as Record<string, unknown>)['autoUpdateEnabled'] === 'boolean')
    return;
  const next = { ...settings, updater: { ...(updater !== null && typeof updater === 'object' ? updater : {}), autoUpdateEnabled: false } };
  await mkdir(join(codexHome, 'app-server-daemon'), { recursive: true, mode: 0o700 });
  // Two workers may race here; each writes the same content and the rename is atomic.
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  await writeFile(tmp, `${JSON.stringify(next, null, 2)}\n`, { mode: 0o600 });
  await rename(tmp, file);
}

/**
 * Starts the Codex home's app-server daemon unless it runs already, and returns its control
 * socket. `codex app-server daemon start` is idempotent and serialised per Codex home by Codex's
 * own lock (`app-server-daemon/daemon.lock`), so workers racing here end with one daemon. Before
 * it, the home's daemon package is pointed at the installed package of `binary` when it has
 * none (daemon-package.ts: no 424 MB copy), and a daemon this call starts gets `agentEnv` and
 * has it recorded.
 * @throws the spawn error (ENOENT / EACCES: the binary), or an Error with Codex's message when
 *   the start fails, or the signal's reason.
 */
export async function ensureAppServerDaemon(opts: DaemonOptions, signal: AbortSignal): Promise<RunningDaemon> {
  await keepDaemonUpdaterOff(opts.codexHome);
  const pkg = await ensureDaemonPackage(opts.codexHome, opts.binary, opts.agentEnv?.['PATH'] ?? opts.env['PATH']);
  const { stdout, stderr, code } = await run(opts, ['app-server', 'daemon', 'start'], signal);
  const status = lastJson(stdout);
  if (code !== 0 || !status || typeof status['socketPath'] !== 'string') {
    throw new Error(`codex app-server daemon start failed (exit ${code}): ${lastLine(stderr) || lastLine(stdout) || 'no output'}`);
  }
  const daemon = status as unknown as DaemonStatus;
  const agentEnv = opts.agentEnv ?? {};
  if (daemon.status === 'started' && typeof daemon.pid === 'number') {
    await recordDaemonEnv(opts.codexHome, daemon.pid, agentEnv);
  }
  return { ...daemon, envFingerprint: await runningDaemonEnv(opts.codexHome), package: pkg };
}

/**
 * Stops the home's daemon (`codex app-server daemon stop`): its running turns end. Baton calls it
 * only to restart an idle daemon with another agent `env`.
 * @throws an Error with Codex's message when the stop fails, or the signal's reason.
 */
export async function stopAppServerDaemon(opts: DaemonOptions, signal: AbortSignal): Promise<void> {
  const { stdout, stderr, code } = await run(opts, ['app-server', 'daemon', 'stop'], signal);
  if (code !== 0)
    throw new Error(`codex app-server daemon stop failed (exit ${code}): ${lastLine(stderr) || lastLine(stdout) || 'no output'}`);
}

function run(opts: DaemonOptions, args: string[], signal: AbortSignal): Promise<{ stdout: string; stderr: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    // The daemon detaches from this child (its own session), so killing the child on abort
    // stops only the start command, never a daemon that others use.
    const child = spawn(opts.binary, args, {
      env: { ...opts.env, ...opts.agentEnv, CODEX_HOME: opts.codexHome },
      stdio: ['ignore', 'pipe', 'pipe'],
      signal,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-4_000)));
    child.once('error', (err) => reject(signal.aborted ? signal.reason : err));
    child.once('close', (code) => resolve({ stdout, stderr, code }));
  });
}

function lastJson(text: string): Record<string, unknown> | null {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('{'));
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      return JSON.parse(lines[i]!) as Record<string, unknown>;
    } catch {
      // not the status line
    }
  }
  return null;
}

export function lastLine(text: string): string {
  const lines = text
    .replace(/\x1b\[[0-9;]*m/g, '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('WARNING: proceeding, even though we could not create PATH aliases'));
  return (lines[lines.length - 1] ?? '').slice(0, 300);
}
