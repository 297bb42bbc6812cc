import { spawnBaton as spawnProcess, type BatonProcess } from '../../libs/processes/spawn-baton.ts';
import { scratchDir } from './scratch-dir.ts';

export type { BatonProcess } from '../../libs/processes/spawn-baton.ts';

/** A BATON_HOME of the test run's own, so no test writes tokens into the real ~/.baton. */
let scratchHome: string | undefined;

/**
 * Runs `baton ARGS` as a separate process (the test runner's PATH and HOME, plus `env`; a
 * scratch BATON_HOME unless `env` names one).
 */
export function spawnBaton(args: string[], env: Record<string, string>, stdin?: string): BatonProcess {
  scratchHome ??= scratchDir('baton-test-home-');
  return spawnProcess(args, { BATON_HOME: scratchHome, ...env }, { PATH: process.env['PATH'], HOME: process.env['HOME'] }, stdin);
}

/** Runs `baton ARGS` to completion (with `stdin` piped in, if given). */
export async function runBaton(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 30_000,
  stdin?: string,
): Promise<{ code: number | null; output: string }> {
  const p = spawnBaton(args, env, stdin);
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const code = await p.exited();
  clearTimeout(timer);
  return { code, output: p.output() };
}

/**
 * How long a freshly spawned worker may take to start and run its first turn: a few seconds on a
 * quiet host, far more with every core busy (Node's start, the compiled CLI, the connections,
 * the first job). Tests that spawn a worker and wait for its first move use this bound.
 */
export const SPAWNED_FIRST_TURN_MS = 45_000;
