import { Command, CommanderError } from 'commander';
import { ConfigError } from '../../libs/config/config-error.ts';
import { ApiError, ApiUnreachable } from '../../libs/api-client/api-client.ts';
import { ERROR_CATALOG, isErrorCode } from '../../libs/domain/errors.ts';
import { UsageError, createCliContext, readProcessStdin } from './cli-context.ts';
import { registerDemoCommand } from './commands/demo.ts';
import { registerBenchCommand } from './commands/bench.ts';
import { registerChaosCommand } from './commands/chaos.ts';
import { registerAgentCommands } from './commands/agent.ts';
import { registerProcessCommands } from './commands/processes.ts';
import { registerSendCommand } from './commands/send.ts';
import { registerWatchCommand } from './commands/watch.ts';
import { OutcomeExit } from './follow-events.ts';
import { registerReadCommands } from './commands/show.ts';
import { registerActionCommands } from './commands/act.ts';
import { registerWorkCommands } from './commands/work.ts';
import { registerSessionCommands } from './commands/sessions.ts';
import { registerSubscriptionCommands } from './commands/subscriptions.ts';
import { registerBudgetCommands } from './commands/budget.ts';
import { registerIdentityCommands } from './commands/identity.ts';
import { registerMcpCommands } from './commands/mcp.ts';
import { registerDoctorCommand } from './commands/doctor.ts';
import { registerUsageCommand } from './commands/usage.ts';
import { batonVersion } from '../../libs/processes/package-files.ts';
import { NO_LAUNCHERS, type Launchers } from './launchers.ts';

/** Exit codes: 0 done, 1 the operation failed, 2 the command was called wrongly. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/**
 * Codes of the failures the CLI finds itself, printed as `{"error":{"code","message"}}` on
 * stderr when --json was given; a refusal by the API keeps the API's code (docs/ERRORS.md).
 */
export const CLI_ERROR = {
  usage: 'usage_error',
  config: 'invalid_configuration',
  unreachable: 'api_unreachable',
  startup: 'cannot_start',
  internal: 'internal_error',
} as const;

/** Whether --json is among the options (not after `--`, where it would be text). */
function jsonRequested(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

/**
 * The `baton` program. `launchers` start what lives in other services (the API, the benchmark,
 * the chaos run): the entry point (main/baton.ts) hands in the real ones; without them those
 * commands are listed but fail when run.
 */
export function buildProgram(
  env: Readonly<Record<string, string | undefined>>,
  write: (s: string) => void,
  writeErr: (s: string) => void = write,
  readStdin?: () => Promise<string | null>,
  launchers: Launchers = NO_LAUNCHERS,
): Command {
  const ctx = createCliContext(env, write, writeErr, readStdin);
  const program = new Command('baton')
    .description('Baton: durable handoffs between AI coding agents, delivered as exactly one new turn')
    .option('--url <url>', 'Baton API (default BATON_URL or http://127.0.0.1:8787)')
    .option('--project <project>', 'project (default BATON_PROJECT or "default")')
    .version(batonVersion(), '-V, --version', "print Baton's version")
    .exitOverride();
  registerProcessCommands(program, ctx, launchers.startApi);
  registerDemoCommand(program, ctx, launchers.startApi);
  registerBenchCommand(program, ctx, launchers.bench);
  registerChaosCommand(program, ctx, launchers.chaos);
  registerAgentCommands(program, ctx);
  registerSendCommand(program, ctx);
  registerWatchCommand(program, ctx);
  registerReadCommands(program, ctx);
  registerUsageCommand(program, ctx);
  registerActionCommands(program, ctx);
  registerWorkCommands(program, ctx);
  registerSessionCommands(program, ctx);
  registerSubscriptionCommands(program, ctx);
  registerBudgetCommands(program, ctx);
  registerIdentityCommands(program, ctx);
  registerMcpCommands(program, ctx);
  registerDoctorCommand(program, ctx);
  // A usage error is commander's line (with its "Did you mean ...?") and one line of where to
  // look, not the whole help.
  const hint = (cmd: Command, path: string[]): void => {
    cmd.showHelpAfterError(`(see "baton ${[...path, '--help'].join(' ')}" for ${cmd.commands.length > 0 ? 'the commands' : 'its usage'})`);
    cmd.exitOverride();
    for (const sub of cmd.commands) hint(sub, [...path, sub.name()]);
  };
  hint(program, []);
  return program;
}

export interface CliIo {
  out: (s: string) => void;
  err: (s: string) => void;
  /** What is piped in (null: a terminal, nothing piped); absent means nothing is piped. */
  stdin?: () => Promise<string | null>;
}

export const PROCESS_IO: CliIo = {
  out: (s) => void process.stdout.write(s),
  err: (s) => void process.stderr.write(s),
  stdin: readProcessStdin,
};

/** Runs the CLI and returns the exit code (never throws); `launchers` as for buildProgram. */
export async function runCli(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = process.env,
  io: CliIo = PROCESS_IO,
  launchers: Launchers = NO_LAUNCHERS,
): Promise<number> {
  const program = buildProgram(env, io.out, io.err, io.stdin?.bind(io), launchers);
  // With --json, a failure is one JSON line on stderr (below) instead of commander's text.
  const json = jsonRequested(argv);
  const output = json
    ? { writeOut: io.out, writeErr: () => undefined, outputError: () => undefined }
    : { writeOut: io.out, writeErr: io.err };
  program.configureOutput(output);
  for (const cmd of program.commands) {
    cmd.configureOutput(output);
    for (const sub of cmd.commands) sub.configureOutput(output);
  }
  const fail = (code: string, prefix: string, message: string, exit: number): number => {
    io.err(json ? `${JSON.stringify({ error: { code, message } })}\n` : `${prefix}${message}\n`);
    return exit;
  };
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return EXIT.ok;
      return json ? fail(CLI_ERROR.usage, '', err.message.replace(/^error: /, ''), EXIT.usage) : EXIT.usage;
    }
    // `send --wait` / `watch ID`: the outcome was printed; the exit code says how it ended.
    if (err instanceof OutcomeExit) return err.exitCode;
    if (err instanceof UsageError) return fail(CLI_ERROR.usage, 'error: ', err.message, EXIT.usage);
    if (err instanceof ConfigError) return fail(CLI_ERROR.config, 'configuration error: ', err.message, EXIT.usage);
    if (err instanceof ApiError) return fail(err.code, `error: ${err.code}: `, err.message, EXIT.failed);
    // A use case run in the CLI itself (init, db migrate) refuses as the API would: its code and message.
    const local = batonRefusal(err);
    if (local) return fail(local.code, `error: ${local.code}: `, local.message, EXIT.failed);
    if (err instanceof Error && err.name === 'StartupError') return fail(CLI_ERROR.startup, 'cannot start: ', err.message, EXIT.failed);
    if (err instanceof Error && err.name === 'DemoSetupError')
      return fail(CLI_ERROR.startup, 'cannot start the demo: ', err.message, EXIT.failed);
    if (err instanceof ApiUnreachable) return fail(CLI_ERROR.unreachable, 'error: ', err.message, EXIT.failed);
    // A stack for a person; JSON readers get the message only.
    return fail(
      CLI_ERROR.internal,
      'error: ',
      json ? ((err as Error)?.message ?? String(err)) : ((err as Error)?.stack ?? String(err)),
      EXIT.failed,
    );
  }
}

/** A BatonError thrown in this process (matched on its name and code, not its class) with a 4xx code: shown as the API shows it. */
function batonRefusal(err: unknown): { code: string; message: string } | null {
  const e = err as { name?: unknown; code?: unknown; message?: unknown } | null;
  if (e?.name !== 'BatonError' || !isErrorCode(e.code) || ERROR_CATALOG[e.code].status >= 500) return null;
  return { code: e.code, message: String(e.message) };
}
