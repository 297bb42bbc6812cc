import { spawn, type ChildProcess } from 'node:child_process';
import { BATON_BIN } from './package-files.ts';

export { BATON_BIN } from './package-files.ts';

export interface BatonProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  output(): string;
  /** Resolves when `pattern` has been printed (stdout or stderr); rejects if the process exits first. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Sends `signal` (SIGKILL after `timeoutMs`) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
  exited(): Promise<number | null>;
}

/** BATON_CPU_PROF_DIR=DIR: every spawned process writes a V8 CPU profile there when it exits (profiling the bench). */
function profileFlags(): string[] {
  const dir = process.env['BATON_CPU_PROF_DIR'];
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

/**
 * Runs `baton ARGS` as a separate process with exactly the environment given (plus PATH and
 * HOME). Used by the benchmark and by tests that need real processes.
 */
export function spawnBaton(
  args: string[],
  env: Record<string, string>,
  inherit: { PATH?: string | undefined; HOME?: string | undefined } = {},
  /** Text piped to its stdin (default: none, stdin is /dev/null). */
  stdin?: string,
): BatonProcess {
  const child = spawn(process.execPath, [...profileFlags(), BATON_BIN, ...args], {
    env: { PATH: inherit.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: inherit.HOME ?? '/tmp', ...env },
    stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (stdin !== undefined) child.stdin?.end(stdin);
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    out += chunk.toString('utf8');
    if (out.length > 1_000_000) out = out.slice(-500_000);
    for (const l of [...listeners]) l();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    pid: child.pid ?? -1,
    output: () => out,
    waitFor(pattern, timeoutMs = 20_000) {
      return new Promise<string>((resolve, reject) => {
        const check = () => {
          const m = out.match(pattern);
          if (m) {
            listeners.delete(check);
            clearTimeout(timer);
            resolve(m[0]);
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting for ${pattern}; output so far:\n${out.slice(-4000)}`));
        }, timeoutMs);
        listeners.add(check);
        void exit.then(() => {
          if (listeners.has(check)) {
            listeners.delete(check);
            clearTimeout(timer);
            reject(new Error(`process exited before printing ${pattern}; output:\n${out.slice(-4000)}`));
          }
        });
        check();
      });
    },
    async stop(signal = 'SIGTERM', timeoutMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const code = await exit;
      clearTimeout(timer);
      return code;
    },
    exited: () => exit,
  };
}
