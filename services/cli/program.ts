import { Command, CommanderError } from 'commander';
import { ConfigError } from '../../libs/config/load-config.ts';
import { ApiError, ApiUnreachable } from './api-client.ts';
import { UsageError, createCliContext, readProcessStdin } from './cli-context.ts';
import { registerDemoCommand } from './commands/demo.ts';
import { registerBenchCommand } from './commands/bench.ts';
import { registerAgentCommands } from './commands/agent.ts';
import { registerProcessCommands } from './commands/processes.ts';
import { registerSendCommand } from './commands/send.ts';
import { registerReadCommands } from './commands/show.ts';
import { registerActionCommands } from './commands/act.ts';
import { registerWorkCommands } from './commands/work.ts';
import { registerSessionCommands } from './commands/sessions.ts';
import { registerIdentityCommands } from './commands/identity.ts';

/** Exit codes: 0 done, 1 the operation failed, 2 the command was called wrongly. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

export function buildProgram(
  env: Readonly<Record<string, string | undefined>>,
  write: (s: string) => void,
  writeErr: (s: string) => void = write,
  readStdin?: () => Promise<string | null>,
): Command {
  const ctx = createCliContext(env, write, writeErr, readStdin);
  const program = new Command('baton')
    .description('Baton: durable handoffs between AI coding agents, delivered as exactly one new turn')
    .option('--url <url>', 'Baton API (default BATON_URL or http://127.0.0.1:8787)')
    .option('--project <project>', 'project (default BATON_PROJECT or "default")')
    .showHelpAfterError()
    .exitOverride();
  registerProcessCommands(program, ctx);
  registerDemoCommand(program, ctx);
  registerBenchCommand(program, ctx);
  registerAgentCommands(program, ctx);
  registerSendCommand(program, ctx);
  registerReadCommands(program, ctx);
  registerActionCommands(program, ctx);
  registerWorkCommands(program, ctx);
  registerSessionCommands(program, ctx);
  registerIdentityCommands(program, ctx);
  for (const cmd of program.commands) {
    cmd.exitOverride();
    for (const sub of cmd.commands) sub.exitOverride();
  }
  return program;
}

export interface CliIo {
  out(s: string): void;
  err(s: string): void;
  /** What is piped in (null: a terminal, nothing piped); absent means nothing is piped. */
  stdin?(): Promise<string | null>;
}

const processIo: CliIo = { out: (s) => void process.stdout.write(s), err: (s) => void process.stderr.write(s), stdin: readProcessStdin };

/** Runs the CLI and returns the exit code (never throws). */
export async function runCli(argv: readonly string[], env: Readonly<Record<string, string | undefined>> = process.env, io: CliIo = processIo): Promise<number> {
  const program = buildProgram(env, io.out, io.err, io.stdin?.bind(io));
  program.configureOutput({ writeOut: io.out, writeErr: io.err });
  for (const cmd of program.commands) {
    cmd.configureOutput({ writeOut: io.out, writeErr: io.err });
    for (const sub of cmd.commands) sub.configureOutput({ writeOut: io.out, writeErr: io.err });
  }
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return EXIT.ok;
      return EXIT.usage;
    }
    if (err instanceof UsageError) {
      io.err(`error: ${err.message}\n`);
      return EXIT.usage;
    }
    if (err instanceof ConfigError) {
      io.err(`configuration error: ${err.message}\n`);
      return EXIT.usage;
    }
    if (err instanceof ApiError) {
      io.err(`error: ${err.code}: ${err.message}\n`);
      return EXIT.failed;
    }
    if (err instanceof Error && err.name === 'StartupError') {
      io.err(`cannot start: ${err.message}\n`);
      return EXIT.failed;
    }
    if (err instanceof Error && err.name === 'DemoSetupError') {
      io.err(`cannot start the demo: ${err.message}\n`);
      return EXIT.failed;
    }
    if (err instanceof ApiUnreachable) {
      io.err(`error: ${err.message}\n`);
      return EXIT.failed;
    }
    io.err(`error: ${(err as Error)?.stack ?? String(err)}\n`);
    return EXIT.failed;
  }
}
