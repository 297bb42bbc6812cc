import type { Command } from 'commander';
import type { CliContext } from '../cli-context.ts';

/**
 * `baton bench [--quick] [--json]` (also `npm run bench`): measures Baton beside the ceilings
 * of its parts on this machine. The implementation (services/bench) starts its own processes,
 * so it is loaded only when the command runs.
 */
export function registerBenchCommand(program: Command, ctx: CliContext): void {
  program
    .command('bench')
    .description('measure send, end-to-end delivery, busy agents, recovery and cost beside raw Postgres/BullMQ ceilings')
    .option('--quick', 'a smoke run for CI (under a minute)')
    .option('--json', 'print the results as JSON (the table goes to stderr)')
    .option('--no-progress', 'no progress bar')
    .action(async (opts: { quick?: boolean; json?: boolean; progress: boolean }) => {
      const { runBench, renderReport } = await import('../../bench/run-bench.ts');
      const result = await runBench(
        ctx.config(),
        { quick: opts.quick === true, json: opts.json === true, progress: opts.progress, tty: process.stderr.isTTY === true },
        (s) => void process.stderr.write(s),
      );
      if (opts.json) {
        ctx.json(result);
        process.stderr.write(`${renderReport(result)}\n`);
      } else {
        ctx.out(renderReport(result));
      }
    });
}
