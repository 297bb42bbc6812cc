import { InvalidArgumentError, type Command } from 'commander';
import { loadConfig, type BatonConfig } from '../../libs/config/load-config.ts';
import { ApiClient } from './api-client.ts';

/** A mistake in how the command was called: printed with a hint, exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** What a command needs, built lazily so `baton --help` works with a broken environment. */
export interface CliContext {
  /** The environment the CLI was started with (read only through loadConfig). */
  readonly env: Readonly<Record<string, string | undefined>>;
  config(): BatonConfig;
  client(cmd: Command): ApiClient;
  out(line: string): void;
  json(value: unknown): void;
}

export function createCliContext(env: Readonly<Record<string, string | undefined>>, write: (s: string) => void): CliContext {
  let cached: BatonConfig | undefined;
  const config = () => (cached ??= loadConfig(env));
  return {
    env,
    config,
    client(cmd: Command) {
      const opts = cmd.optsWithGlobals<{ url?: string; project?: string }>();
      return new ApiClient(opts.url ?? config().api.publicUrl, opts.project ?? config().defaultProject);
    },
    out: (line) => write(`${line}\n`),
    json: (value) => write(`${JSON.stringify(value, null, 2)}\n`),
  };
}

/** Parses a whole positive number option; commander reports a bad one as a usage error (exit 2). */
export function positiveInt(name: string, max = Number.MAX_SAFE_INTEGER) {
  return (raw: string): number => {
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max) throw new InvalidArgumentError(`${name} must be a whole number from 1 to ${max}`);
    return Number(raw);
  };
}

/** Parses a whole number option that may be zero. */
export function nonNegativeInt(name: string, max = Number.MAX_SAFE_INTEGER) {
  return (raw: string): number => {
    if (!/^\d+$/.test(raw) || Number(raw) > max) throw new InvalidArgumentError(`${name} must be a whole number from 0 to ${max}`);
    return Number(raw);
  };
}

export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}
