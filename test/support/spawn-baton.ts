import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BATON_BIN = fileURLToPath(new URL('../../bin/baton.mjs', import.meta.url));

export interface BatonProcess {
  readonly child: ChildProcess;
  output(): string;
  /** Resolves when a line matching `pattern` has been printed (stdout or stderr). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
  exited(): Promise<number | null>;
}

/** Runs `baton ARGS` as a separate process with exactly the environment given (plus PATH/HOME). */
export function spawnBaton(args: string[], env: Record<string, string>): BatonProcess {
  const child = spawn(process.execPath, [BATON_BIN, ...args], {
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    out += chunk.toString('utf8');
    for (const l of [...listeners]) l();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
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
          reject(new Error(`timed out waiting for ${pattern}; output so far:\n${out}`));
        }, timeoutMs);
        listeners.add(check);
        exit.then(() => {
          if (listeners.has(check)) {
            listeners.delete(check);
            clearTimeout(timer);
            reject(new Error(`process exited before printing ${pattern}; output:\n${out}`));
          }
        });
        check();
      });
    },
    async stop(signal = 'SIGTERM', timeoutMs = 15_000) {
      if (child.exitCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const code = await exit;
      clearTimeout(timer);
      return code;
    },
    exited: () => exit,
  };
}

/** Runs `baton ARGS` to completion. */
export async function runBaton(args: string[], env: Record<string, string>, timeoutMs = 30_000): Promise<{ code: number | null; output: string }> {
  const p = spawnBaton(args, env);
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const code = await p.exited();
  clearTimeout(timer);
  return { code, output: p.output() };
}
