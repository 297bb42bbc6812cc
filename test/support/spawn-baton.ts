import { spawnBaton as spawnProcess, type BatonProcess } from '../../services/cli/spawn-baton.ts';

export type { BatonProcess } from '../../services/cli/spawn-baton.ts';

/** Runs `baton ARGS` as a separate process (the test runner's PATH and HOME, plus `env`). */
export function spawnBaton(args: string[], env: Record<string, string>): BatonProcess {
  return spawnProcess(args, env, { PATH: process.env['PATH'], HOME: process.env['HOME'] });
}

/** Runs `baton ARGS` to completion. */
export async function runBaton(args: string[], env: Record<string, string>, timeoutMs = 30_000): Promise<{ code: number | null; output: string }> {
  const p = spawnBaton(args, env);
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const code = await p.exited();
  clearTimeout(timer);
  return { code, output: p.output() };
}
