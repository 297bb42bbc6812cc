import type { Command } from 'commander';
import { UsageError, type CliContext } from '../cli-context.ts';

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
    .option('--only <scenarios>', 'run only these scenarios, comma-separated (ceilings, send, delivery, dispatch-latency, busy-agents, recovery, long-turns)')
    .action(async (opts: { quick?: boolean; json?: boolean; progress: boolean; only?: string }) => {
      const { runBench, renderReport, parseScenarios } = await import('../../bench/run-bench.ts');
      let only: ReturnType<typeof parseScenarios> | undefined;
      try {
        only = opts.only !== undefined ? parseScenarios(opts.only) : undefined;
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
      const result = await runBench(
        ctx.config(),
        { quick: opts.quick === true, json: opts.json === true, progress: opts.progress, tty: process.stderr.isTTY === true, ...(only ? { only } : {}) },
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
