import { runCli } from '../../services/cli/program.ts';

/** Runs the CLI in this process with exactly `env` and captures what it prints and its exit code. */
export async function captureCli(
  env: Record<string, string>,
  argv: readonly string[],
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli([...argv], env, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err };
}
