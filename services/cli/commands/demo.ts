import type { Command } from 'commander';
import { positiveInt, type CliContext } from '../cli-context.ts';
import type { ApiLauncher } from '../launchers.ts';

/**
 * `baton demo`: see Baton work on embedded defaults. The implementation (demo/run-demo.ts)
 * loads the server side, so it is imported only when the command runs. A missing
 * prerequisite (no redis-server, no postgres user when root) throws a DemoSetupError, which
 * the CLI prints with what to install and exits 1.
 */
export function registerDemoCommand(program: Command, ctx: CliContext, startApi: ApiLauncher): void {
  program
    .command('demo')
    .description('see Baton work: four simulated agents hand work to each other (Ctrl+C stops and cleans up)')
    .option('--think-ms <ms>', 'how long each simulated turn takes', positiveInt('--think-ms', 600_000), 700)
    .option('--chains <n>', 'relays running at once', positiveInt('--chains', 20), 2)
    .option('--duration <seconds>', 'stop by itself after this long', positiveInt('--duration', 86_400))
    .option('--verbose', 'print every transition of every handoff (default: one line per handoff when it settles)')
    .option(
      '--json',
      'one JSON object per line: started (API URL, token, live page, show command), agent_registered, transition, settled, summary, stopping, stopped',
    )
    .action(async (opts: { thinkMs: number; chains: number; duration?: number; json?: boolean; verbose?: boolean }) => {
      const { runDemo } = await import('../demo/run-demo.ts');
      await runDemo(ctx, opts, startApi);
    });
}
