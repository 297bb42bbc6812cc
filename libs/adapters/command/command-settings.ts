import { isAbsolute } from 'node:path';
import { Type, type Static } from 'typebox';
import { Compile } from 'typebox/compile';
import type { ProviderSpec } from '../provider-spec.ts';
import { envProblems, envSetting, envValues, redactEnv } from '../env-settings.ts';
import { PROGRAM_ENV_NAMES } from '../../domain/inherited-env.ts';

/** The variables Baton sets for every turn; an agent's `env` may not name them. */
export const TURN_ENV_NAMES = ['BATON_HANDOFF_ID', 'BATON_REQUEST_ID', 'BATON_ATTEMPT', 'BATON_FROM', 'BATON_TITLE'] as const;

/**
 * What a program inherits from the worker's own environment, and nothing else: enough to find
 * programs and write files, never the worker's DATABASE_URL, REDIS_URL, BATON_TOKEN or any other
 * secret. Everything else a program needs goes in the agent's `env`.
 */
export const INHERITED_ENV_NAMES = PROGRAM_ENV_NAMES;

export const COMMAND_DEFAULTS = {
  timeoutMs: 60 * 60_000,
  maxOutputBytes: 64 * 1024,
  /** EX_TEMPFAIL (sysexits.h): "try again later". */
  busyExitCode: 75,
  /** EX_NOPERM (sysexits.h): "not allowed". */
  refusedExitCode: 77,
} as const;

const ExitCode = Type.Integer({ minimum: 1, maximum: 255 });

const CommandSettingsSchema = Type.Object(
  {
    argv: Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), {
      minItems: 1,
      maxItems: 256,
      description: 'the program and its arguments; run directly, never through a shell',
    }),
    cwd: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: "absolute working directory (default: the worker's)" })),
    env: envSetting('NAME -> value, or NAME -> { value, secret: true } for a value no read shows'),
    timeoutMs: Type.Optional(
      Type.Integer({ minimum: 100, maximum: 24 * 60 * 60_000, description: "the turn's deadline; past it the process group is killed" }),
    ),
    maxOutputBytes: Type.Optional(
      Type.Integer({
        minimum: 256,
        maximum: 1024 * 1024,
        description: 'bytes of standard output (the summary) and of standard error kept',
      }),
    ),
    busyExitCode: Type.Optional(ExitCode),
    refusedExitCode: Type.Optional(ExitCode),
  },
  { additionalProperties: false },
);

type RawCommandSettings = Static<typeof CommandSettingsSchema>;

/** An agent's command settings with every default applied. */
export interface CommandSettings {
  readonly argv: readonly string[];
  readonly cwd: string | null;
  /** Plain values, secrets included: only the adapter sees these. */
  readonly env: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  readonly busyExitCode: number;
  readonly refusedExitCode: number;
}

function checkCommandSettings(settings: Readonly<Record<string, unknown>>): string[] {
  const s = settings as Partial<RawCommandSettings>;
  const problems: string[] = [];
  const nul = (v: string) => v.includes('\0');
  if (s.argv?.some(nul)) problems.push('/argv: must not contain NUL characters');
  if (s.cwd !== undefined) {
    if (!isAbsolute(s.cwd)) problems.push('/cwd: must be an absolute path');
    if (nul(s.cwd)) problems.push('/cwd: must not contain NUL characters');
  }
  problems.push(
    ...envProblems(s.env, (name) => ((TURN_ENV_NAMES as readonly string[]).includes(name) ? 'is set by Baton for every turn' : null)),
  );
  const busy = s.busyExitCode ?? COMMAND_DEFAULTS.busyExitCode;
  const refused = s.refusedExitCode ?? COMMAND_DEFAULTS.refusedExitCode;
  if (busy === refused) problems.push(`/refusedExitCode: must differ from busyExitCode (${busy})`);
  return problems;
}

export const COMMAND_SPEC: ProviderSpec = {
  provider: 'command',
  push: true,
  summary: 'runs a program per turn (argv, no shell): the turn on stdin, exit 0 returns stdout as the summary',
  settingsSchema: CommandSettingsSchema,
  check: checkCommandSettings,
  redact(settings) {
    return settings['env'] === undefined ? { ...settings } : { ...settings, env: redactEnv(settings['env']) };
  },
  // The write is starting a supervisor that starts the program (well under a second when the
  // host is idle); observing and the busy question read a few small local files.
  deadlines: { writeMs: 10_000, observeMs: 5_000, busyMs: 5_000 },
};

const checker = Compile(CommandSettingsSchema);

/**
 * An agent's settings, checked again at delivery (they may predate a schema change) and with
 * defaults applied.
 * @returns the settings, or the problems that make them unusable.
 */
export function parseCommandSettings(
  settings: Readonly<Record<string, unknown>>,
): { ok: true; settings: CommandSettings } | { ok: false; problems: string[] } {
  if (!checker.Check(settings)) {
    return { ok: false, problems: [...checker.Errors(settings)].slice(0, 3).map((e) => `${e.instancePath || '/'}: ${e.message}`) };
  }
  const problems = checkCommandSettings(settings);
  if (problems.length > 0) return { ok: false, problems };
  const s = settings;
  const env = envValues(s.env);
  return {
    ok: true,
    settings: {
      argv: s.argv,
      cwd: s.cwd ?? null,
      env,
      timeoutMs: s.timeoutMs ?? COMMAND_DEFAULTS.timeoutMs,
      maxOutputBytes: s.maxOutputBytes ?? COMMAND_DEFAULTS.maxOutputBytes,
      busyExitCode: s.busyExitCode ?? COMMAND_DEFAULTS.busyExitCode,
      refusedExitCode: s.refusedExitCode ?? COMMAND_DEFAULTS.refusedExitCode,
    },
  };
}
