import { Command, CommanderError } from 'commander';
import { ConfigError } from '../../libs/config/load-config.ts';
import { ApiError, ApiUnreachable } from './api-client.ts';
import { UsageError, createCliContext } from './cli-context.ts';
import { registerAgentCommands } from './commands/agent.ts';
import { registerDemoCommand } from './commands/demo.ts';
import { registerProcessCommands } from './commands/processes.ts';
import { registerSendCommand } from './commands/send.ts';
import { registerReadCommands } from './commands/show.ts';

/** Exit codes: 0 done, 1 the operation failed, 2 the command was called wrongly. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

export function buildProgram(env: Readonly<Record<string, string | undefined>>, write: (s: string) => void): Command {
  const ctx = createCliContext(env, write);
  const program = new Command('baton')
    .description('Baton: durable handoffs between AI coding agents, delivered as exactly one new turn')
    .option('--url <url>', 'Baton API (default BATON_URL or http://127.0.0.1:8787)')
    .option('--project <project>', 'project (default BATON_PROJECT or "default")')
    .showHelpAfterError()
    .exitOverride();
  registerProcessCommands(program, ctx);
  registerDemoCommand(program, ctx);
  registerAgentCommands(program, ctx);
  registerSendCommand(program, ctx);
  registerReadCommands(program, ctx);
  for (const cmd of program.commands) {
    cmd.exitOverride();
    for (const sub of cmd.commands) sub.exitOverride();
  }
  return program;
}

/** Runs the CLI and returns the exit code (never throws). */
export async function runCli(argv: readonly string[], env = process.env): Promise<number> {
  const write = (s: string) => void process.stdout.write(s);
  const program = buildProgram(env, write);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return EXIT.ok;
      return EXIT.usage;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`error: ${err.message}\n`);
      return EXIT.usage;
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      return EXIT.usage;
    }
    if (err instanceof ApiError) {
      process.stderr.write(`error: ${err.code}: ${err.message}\n`);
      return EXIT.failed;
    }
    if (err instanceof ApiUnreachable) {
      process.stderr.write(`error: ${err.message}\n`);
      return EXIT.failed;
    }
    process.stderr.write(`error: ${(err as Error)?.stack ?? String(err)}\n`);
    return EXIT.failed;
  }
}
