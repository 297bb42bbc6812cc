import type { Command } from 'commander';
import { positiveInt, type CliContext } from '../cli-context.ts';
import type { DoctorCheck } from '../doctor/doctor-check.ts';
import { CLI_DEFAULTS } from '../../../libs/config/component-defaults.ts';
import { OutcomeExit } from '../follow-events.ts';

/** One line per check: status, what, what was found, and what to do when it is not ok. */
function checkLine(c: DoctorCheck, width: number): string {
  return `${c.status.padEnd(4)}  ${c.name.padEnd(width)}  ${c.detail}${c.fix ? `  → ${c.fix}` : ''}`;
}

/** `baton doctor`: checks a setup end to end and says what to fix; exit 1 when any check fails. */
export function registerDoctorCommand(program: Command, ctx: CliContext): void {
  program
    .command('doctor')
    .description(
      "check the configuration, Postgres, Redis, the API and its token, and each agent's provider prerequisites; one line each, with what to do",
    )
    .option(
      '--timeout <ms>',
      `deadline of each network check in ms (default ${CLI_DEFAULTS.doctorTimeoutMs})`,
      positiveInt('--timeout', 60_000),
    )
    .option('--json', 'print JSON: { ok, checks: [{ name, status, detail, fix }] }')
    .action(async (opts: { timeout?: number; json?: boolean }, cmd: Command) => {
      // Loaded when it runs: pg, ioredis and the provider specs stay out of other commands' start.
      const { runDoctor } = await import('../doctor/run-doctor.ts');
      const checks = await runDoctor({
        env: ctx.env,
        connection: () => ctx.connection(cmd),
        timeoutMs: opts.timeout ?? CLI_DEFAULTS.doctorTimeoutMs,
      });
      const failed = checks.filter((c) => c.status === 'fail').length;
      const warned = checks.filter((c) => c.status === 'warn').length;
      if (opts.json) {
        ctx.json({ ok: failed === 0, checks });
      } else {
        const width = Math.max(...checks.map((c) => c.name.length));
        for (const c of checks) ctx.out(checkLine(c, width));
        ctx.out(`${checks.length - failed - warned} ok, ${warned} warning${warned === 1 ? '' : 's'}, ${failed} failed`);
      }
      if (failed > 0) throw new OutcomeExit(1, `${failed} check${failed === 1 ? '' : 's'} failed`);
    });
}
