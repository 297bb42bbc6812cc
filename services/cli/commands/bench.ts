import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { CliContext } from '../cli-context.ts';
import type { BenchLauncher } from '../launchers.ts';

/**
 * `baton bench [--quick] [--json] [--html FILE] [--workers 1,2,4]` (also `npm run bench`):
 * measures Baton beside the ceilings of its parts on this machine; `--html` also writes a
 * self-contained page with the run's plots. The implementation (services/bench) starts its own processes;
 * `bench` (handed in by the entry point) loads it only when the command runs.
 */
export function registerBenchCommand(program: Command, ctx: CliContext, bench: BenchLauncher): void {
  program
    .command('bench')
    .description('measure send, end-to-end delivery, busy agents, recovery and cost beside raw Postgres/BullMQ ceilings')
    .option('--quick', 'a smoke run for CI (under a minute)')
    .option('--json', 'print the results as JSON (the table goes to stderr)')
    .option('--no-progress', 'no progress bar')
    .option(
      '--only <scenarios>',
      'run only these scenarios, comma-separated (ceilings, send, delivery, dispatch-latency, busy-agents, recovery, long-turns, ' +
        'role-routing, startup, capacity)',
    )
    .option('--workers <counts>', 'worker process counts of the capacity runs, comma-separated (default 1,2,4; --quick 1,2)')
    .option('--html <file>', 'also write a self-contained HTML page with the run’s plots and targets to this file')
    .action(async (opts: { quick?: boolean; json?: boolean; progress: boolean; only?: string; workers?: string; html?: string }) => {
      const { result, report, html } = await bench(
        ctx.config(),
        {
          quick: opts.quick === true,
          json: opts.json === true,
          progress: opts.progress,
          tty: process.stderr.isTTY === true,
          only: opts.only,
          workers: opts.workers,
          html: opts.html !== undefined,
        },
        (s) => void process.stderr.write(s),
      );
      if (opts.html !== undefined && html !== undefined) await writeFile(opts.html, html);
      if (opts.json) {
        ctx.json(result);
        process.stderr.write(`${report}\n`);
      } else {
        ctx.out(report);
      }
    });
}
