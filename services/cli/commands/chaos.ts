import { randomInt } from 'node:crypto';
import type { Command } from 'commander';
import { nonNegativeInt, positiveInt, type CliContext } from '../cli-context.ts';
import { OutcomeExit } from '../follow-events.ts';
import type { ChaosLauncher } from '../launchers.ts';

interface ChaosFlags {
  short?: boolean;
  agents?: number;
  manualAgents?: number;
  handoffs?: number;
  duration?: number;
  deadline?: number;
  seed?: number;
  keepLogs?: boolean;
  starved?: boolean | number;
  json?: boolean;
}

/**
 * `baton chaos` (also `npm run chaos`): a bounded chaos run on 127.0.0.1 with its own Postgres,
 * Redis and Baton processes (DATABASE_URL and REDIS_URL are not used: the run restarts its
 * servers). The implementation (services/chaos) is loaded by `chaos` (handed in by the entry
 * point) only when the command runs. Prints what was injected and the invariants table; exits 1
 * when an invariant broke (or a fault kind was never injected), 130 when interrupted (after
 * cleaning up).
 */
export function registerChaosCommand(program: Command, ctx: CliContext, chaos: ChaosLauncher): void {
  program
    .command('chaos')
    .description(
      'chaos run: 2 API + 3 worker processes, SIGKILLs, Redis and Postgres restarts, proxy latency, stalls ' +
        'and drops (--starved: on a CPU-starved machine); prints the invariants',
    )
    .option('--short', 'the short run the test suite uses (60 agents, 400 handoffs, 30 s of faults)')
    .option('--agents <n>', 'demo agents (default 500; --short 60)', positiveInt('--agents', 5_000))
    .option('--manual-agents <n>', 'pull-only agents with claimer loops (default 8; --short 4)', nonNegativeInt('--manual-agents', 100))
    .option('--handoffs <n>', 'handoffs to send, a tenth of them pull work (default 3300; --short 400)', positiveInt('--handoffs', 100_000))
    .option(
      '--duration <seconds>',
      'how long the sends take while faults go on (default 150; --short 30)',
      positiveInt('--duration', 3_600),
    )
    .option(
      '--deadline <seconds>',
      'longest wait, after the last fault, for every handoff to be final (default 90; --short 45)',
      positiveInt('--deadline', 3_600),
    )
    .option('--seed <n>', 'seed of the plan and the fault schedule (default: random, printed)', nonNegativeInt('--seed', 2 ** 31 - 1))
    .option('--keep-logs', "keep the processes' logs (always kept when the run fails)")
    .option(
      '--starved [per-cpu]',
      'starve Baton of CPU: busy processes spinning beside it, one per CPU (or per-cpu each), until every handoff is final',
      positiveInt('--starved', 16),
    )
    .option('--json', 'print the result as JSON (the tables go to stderr)')
    .action(async (flags: ChaosFlags) => {
      const request = {
        short: flags.short === true,
        sizes: {
          ...(flags.agents !== undefined ? { agents: flags.agents } : {}),
          ...(flags.manualAgents !== undefined ? { manualAgents: flags.manualAgents } : {}),
          ...(flags.handoffs !== undefined ? { handoffs: flags.handoffs } : {}),
          ...(flags.duration !== undefined ? { durationSec: flags.duration } : {}),
          ...(flags.deadline !== undefined ? { deadlineSec: flags.deadline } : {}),
        },
        seed: flags.seed ?? randomInt(2 ** 31 - 1),
        keepLogs: flags.keepLogs === true,
        starved: flags.starved === true ? 1 : typeof flags.starved === 'number' ? flags.starved : 0,
      };
      // Ctrl+C: stop injecting and sending, stop every process, delete the temp directories.
      const interrupt = new AbortController();
      const onSignal = () => {
        if (interrupt.signal.aborted) process.exit(130);
        process.stderr.write('chaos: interrupted; cleaning up (again to exit at once)\n');
        interrupt.abort();
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      try {
        const { ok, result, report } = await chaos(request, (line) => void process.stderr.write(`${line}\n`), interrupt.signal);
        if (flags.json) {
          ctx.json(result);
          process.stderr.write(`${report}\n`);
        } else {
          ctx.out(report);
        }
        if (!ok) throw new OutcomeExit(1, 'an invariant broke');
      } catch (err) {
        // Interrupted (the run rejects with ChaosInterrupted): whatever failed meanwhile (a process
        // stopped by the same Ctrl+C) is no finding.
        if (interrupt.signal.aborted) throw new OutcomeExit(130, 'chaos run interrupted');
        throw err;
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });
}
