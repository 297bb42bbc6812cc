import { readFile } from 'node:fs/promises';
import { InvalidArgumentError, type Command } from 'commander';
import { loadConfig, type BatonConfig } from '../../libs/config/load-config.ts';
import { ApiClient } from '../../libs/api-client/api-client.ts';
import { profileUrlOnly, readProfile } from './profile.ts';
import { colourFor } from './table.ts';
import { UsageError } from './usage-error.ts';

// Commands import UsageError with the rest of their context; it lives in usage-error.ts so that
// profile.ts can throw it without importing this file back.
export { UsageError } from './usage-error.ts';

/** What a command needs, built lazily so `baton --help` works with a broken environment. */
export interface CliContext {
  /** The environment the CLI was started with (read only through loadConfig). */
  readonly env: Readonly<Record<string, string | undefined>>;
  config(): BatonConfig;
  /** An API client for the command's URL, project and token (BATON_TOKEN, else the profile). */
  client(cmd: Command): ApiClient;
  /** Where `client()` finds the API and who it is: for `baton mcp config`, which writes it down. */
  connection(cmd: Command): CliConnection;
  /**
   * Who a command acts as when `--as` is given or BATON_AGENT is set; otherwise undefined,
   * and the API uses the token's own agent.
   */
  as(named: string | undefined): string | undefined;
  /** The agent a command is about: the one named, else BATON_AGENT, else the token's own. */
  agentOrSelf(cmd: Command, named: string | undefined): Promise<string>;
  /** `GET /v1/whoami`, asked once per command run. */
  whoami(cmd: Command): Promise<WhoAmI>;
  /**
   * Whether a read shows every owner's handoffs: `--all-owners` yes, `--no-all-owners` no, and
   * when neither is given, yes for an admin token (as the live page does; one whoami call).
   */
  allOwners(cmd: Command, given: boolean | undefined): Promise<boolean>;
  /** Whether output for people may carry colour (a terminal, NO_COLOR unset). */
  colour(): boolean;
  out: (line: string) => void;
  /** A line for people, on stderr, so stdout stays machine-readable (e.g. a token alone). */
  note: (line: string) => void;
  json(value: unknown): void;
  /** What was piped to the CLI (read once, at first use), or null when stdin is a terminal or absent. */
  stdin(): Promise<string | null>;
}

/** Who the token in use is (`GET /v1/whoami`). */
export interface WhoAmI {
  readonly tokenId: string;
  readonly admin: boolean;
  readonly agent: string | null;
  readonly project: string;
}

/** The API, project and token a command uses, and where the token came from. */
export interface CliConnection {
  readonly url: string;
  readonly project: string | undefined;
  readonly token: string | undefined;
  /** `env`: BATON_TOKEN; `profile`: the profile file at `profilePath`. */
  readonly tokenFrom: 'env' | 'profile' | 'none';
  readonly profilePath: string;
}

/** Reads a piped stdin to its end; null when it is a terminal (nothing was piped). */
export async function readProcessStdin(): Promise<string | null> {
  if (process.stdin.isTTY) return null;
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export function createCliContext(
  env: Readonly<Record<string, string | undefined>>,
  write: (s: string) => void,
  writeErr: (s: string) => void = write,
  readStdin: () => Promise<string | null> = async () => null,
): CliContext {
  let cached: BatonConfig | undefined;
  let piped: Promise<string | null> | undefined;
  let me: Promise<WhoAmI> | undefined;
  const config = () => (cached ??= loadConfig(env));
  return {
    env,
    config,
    connection(cmd: Command) {
      const opts = cmd.optsWithGlobals<{ url?: string; project?: string }>();
      const c = config();
      const fromEnv = (name: string) => c.setVariables.includes(name);
      // The profile gives the token and, unless flags or the environment say otherwise, the URL
      // and project. BATON_TOKEN is an identity of its own: with it, only the profile's URL is
      // used (the project belongs to the profile's token). No project named anywhere: no
      // header, and the API uses the token's.
      const profile = c.token === undefined ? readProfile(c.profilePath) : profileUrlOnly(c.profilePath);
      const url = opts.url ?? (fromEnv('BATON_URL') ? c.api.publicUrl : (profile?.url ?? c.api.publicUrl));
      const project = opts.project ?? (fromEnv('BATON_PROJECT') ? c.defaultProject : profile?.project);
      const token = c.token ?? profile?.token;
      return {
        url,
        project,
        token,
        tokenFrom: c.token !== undefined ? 'env' : token !== undefined ? 'profile' : 'none',
        profilePath: c.profilePath,
      };
    },
    client(cmd: Command) {
      const { url, project, token, profilePath } = this.connection(cmd);
      return new ApiClient(url, project, token, profilePath, undefined, config().clientTimeoutMs);
    },
    as: (named) => named ?? config().agent,
    async agentOrSelf(cmd, named) {
      const who = named ?? config().agent;
      if (who) return who;
      const { agent } = await this.whoami(cmd);
      if (!agent) throw new UsageError('an admin token is no agent: name one (or set BATON_AGENT)');
      return agent;
    },
    whoami(cmd) {
      return (me ??= this.client(cmd).get<WhoAmI>('/v1/whoami'));
    },
    async allOwners(cmd, given) {
      return given ?? (await this.whoami(cmd)).admin;
    },
    colour: () => colourFor(env),
    out: (line) => write(`${line}\n`),
    note: (line) => writeErr(`${line}\n`),
    json: (value) => write(`${JSON.stringify(value, null, 2)}\n`),
    stdin: () => (piped ??= readStdin()),
  };
}

/** One trailing line break, as `echo` and editors add it; everything else is kept as written. */
const withoutFinalNewline = (text: string) => text.replace(/\r?\n$/, '');

/**
 * A long text (a message, a summary, a fact) from where the user put it: the argument itself;
 * `-` for stdin; `--file PATH`; or, when neither is given and `required`, whatever is piped to
 * stdin. Usage errors (exit 2): both an argument and --file, an unreadable file, or nothing
 * given when `required` (stdin a terminal, or empty).
 */
export async function longText(
  ctx: CliContext,
  what: string,
  given: { value?: string | undefined; file?: string | undefined; required: boolean },
): Promise<string | undefined> {
  if (given.file !== undefined) {
    if (given.value !== undefined) throw new UsageError(`give ${what} as an argument or with --file, not both`);
    try {
      return withoutFinalNewline(await readFile(given.file, 'utf8'));
    } catch (err) {
      throw new UsageError(`cannot read ${what} from --file ${given.file}: ${(err as Error).message}`);
    }
  }
  if (given.value !== undefined && given.value !== '-') return given.value;
  if (given.value === undefined && !given.required) return undefined;
  const piped = await ctx.stdin();
  if (piped === null) {
    throw new UsageError(
      given.value === '-'
        ? `${what} is "-" (stdin) but nothing is piped in`
        : `${what} is missing: give it as an argument, with --file PATH, or on stdin`,
    );
  }
  if (piped.trim() === '') throw new UsageError(`${what} is missing: stdin was empty`);
  return withoutFinalNewline(piped);
}

/** Parses a whole positive number option; commander reports a bad one as a usage error (exit 2). */
export function positiveInt(name: string, max = Number.MAX_SAFE_INTEGER) {
  return (raw: string): number => {
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max)
      throw new InvalidArgumentError(`${name} must be a whole number from 1 to ${max}`);
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

/** `{ as }` when the caller named an agent (or BATON_AGENT is set), else nothing: the token decides. */
export function asBody(ctx: CliContext, named: string | undefined): { as?: string } {
  const who = ctx.as(named);
  return who === undefined ? {} : { as: who };
}

export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Help for `--all-owners`, the same on every command that has it. */
export const ALL_OWNERS_HELP = 'admin: every handoff of the project, owned ones of other agents included (all_owners=true)';

/**
 * `--all-owners` and `--no-all-owners` on a read (show, list, status, watch, read, board, inbox,
 * outbox, session show): an admin token sees every owner's handoffs unless it says
 * `--no-all-owners` (then only unowned work and what the token sent itself); `ctx.allOwners`
 * decides.
 */
export function allOwnersOptions(command: Command): Command {
  return command
    .option('--all-owners', `${ALL_OWNERS_HELP}; the default for an admin token`)
    .option('--no-all-owners', "admin: only unowned work and what this token sent (the API's default view)");
}

/** `path` with `all_owners=true` added to its query when the admin asked for every owner's handoffs. */
export function withAllOwners(path: string, allOwners: boolean | undefined): string {
  if (!allOwners) return path;
  return `${path}${path.includes('?') ? '&' : '?'}all_owners=true`;
}
