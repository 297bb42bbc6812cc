import { isAbsolute } from 'node:path';
import { Type, type Static } from 'typebox';
import { Compile } from 'typebox/compile';
import { REDACTED, type ProviderSpec } from '../provider-spec.ts';
import { TURN_ENV_NAMES } from '../command/command-settings.ts';
import { envProblems, envSetting, envValues, redactEnv } from '../env-settings.ts';

/**
 * `--permission-mode` values (claude 2.1.197) a headless turn may run with. `default` and `plan`
 * exist to ask a human (a tool permission, approval of a plan) and `auto` falls back to asking
 * when its classifier keeps blocking: under `-p` nobody answers, so the turn silently loses the
 * tool or the plan. Baton refuses them when the agent is added rather than deliver turns that
 * cannot do their work.
 */
export const HEADLESS_PERMISSION_MODES = ['dontAsk', 'acceptEdits', 'bypassPermissions'] as const;
export const HUMAN_PERMISSION_MODES = ['default', 'plan', 'auto'] as const;

/**
 * Environment names the adapter owns: the config directory and the API key have their own
 * settings (the adapter must know the first to find transcripts; the second is always secret).
 */
const OWNED_ENV_NAMES = ['CLAUDE_CONFIG_DIR', 'ANTHROPIC_API_KEY', ...TURN_ENV_NAMES] as const;
/** Values a read never shows even when `env` does not mark them secret. */
const ALWAYS_SECRET_ENV = new Set(['ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN', 'ANTHROPIC_API_KEY']);

export const CLAUDE_CODE_DEFAULTS = {
  binary: 'claude',
  permissionMode: 'dontAsk',
  timeoutMs: 60 * 60_000,
  maxOutputBytes: 256 * 1024,
  /**
   * Ten minutes from the transcript's last write: longer than a model call or a tool run
   * usually stays silent, and the longest a claude that died mid-turn holds Baton's turns back.
   */
  unfinishedTurnMs: 10 * 60_000,
} as const;

const Path = (description: string) => Type.String({ minLength: 1, maxLength: 4096, description });

const ClaudeCodeSettingsSchema = Type.Object(
  {
    cwd: Path("the session's working directory (absolute); Claude Code scopes sessions and --resume to it"),
    binary: Type.Optional(Path('the claude executable: a path, or a name looked up on PATH (default: claude)')),
    configDir: Type.Optional(
      Path("CLAUDE_CONFIG_DIR (absolute): where the login and the transcripts live (default: Claude Code's own, ~/.claude)"),
    ),
    allowedTools: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 512 }), {
        maxItems: 256,
        description: '--allowedTools: tools the turn may use without asking, e.g. "Edit", "Bash(git *)"',
      }),
    ),
    permissionMode: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description: `--permission-mode: ${HEADLESS_PERMISSION_MODES.join(', ')} (default dontAsk); modes that ask a human are refused`,
      }),
    ),
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: "--model (default: Claude Code's)" })),
    apiKey: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 4096,
        description: 'ANTHROPIC_API_KEY for the turn (secret); without it the login in configDir is used',
      }),
    ),
    env: envSetting('extra variables, NAME -> value or { value, secret: true }'),
    timeoutMs: Type.Optional(
      Type.Integer({
        minimum: 1_000,
        maximum: 24 * 60 * 60_000,
        description: "the turn's deadline; past it the claude process group is killed",
      }),
    ),
    maxOutputBytes: Type.Optional(
      Type.Integer({
        minimum: 1024,
        maximum: 16 * 1024 * 1024,
        description: "bytes of the end of claude's stream (where the result is) and of its standard error read",
      }),
    ),
    unfinishedTurnMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 24 * 60 * 60_000,
        description:
          "how long after the transcript's last write a turn Baton did not start, unfinished there, counts as live (busy); 0: the transcript alone never does",
      }),
    ),
  },
  { additionalProperties: false },
);

type RawSettings = Static<typeof ClaudeCodeSettingsSchema>;

/** An agent's Claude Code settings with every default applied. */
export interface ClaudeCodeSettings {
  readonly cwd: string;
  readonly binary: string;
  readonly configDir: string | null;
  readonly allowedTools: readonly string[];
  readonly permissionMode: (typeof HEADLESS_PERMISSION_MODES)[number];
  readonly model: string | null;
  readonly apiKey: string | null;
  /** Plain values, secrets included: only the adapter sees these. */
  readonly env: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  readonly unfinishedTurnMs: number;
}

const nul = (v: string) => v.includes('\0');

function checkClaudeCodeSettings(settings: Readonly<Record<string, unknown>>): string[] {
  const s = settings as Partial<RawSettings>;
  const problems: string[] = [];
  for (const key of ['cwd', 'configDir'] as const) {
    const v = s[key];
    if (v === undefined) continue;
    if (!isAbsolute(v)) problems.push(`/${key}: must be an absolute path`);
    if (nul(v)) problems.push(`/${key}: must not contain NUL characters`);
  }
  if (s.binary !== undefined && nul(s.binary)) problems.push('/binary: must not contain NUL characters');
  if (s.permissionMode !== undefined && !(HEADLESS_PERMISSION_MODES as readonly string[]).includes(s.permissionMode)) {
    problems.push(
      (HUMAN_PERMISSION_MODES as readonly string[]).includes(s.permissionMode)
        ? `/permissionMode: ${s.permissionMode} waits for a human to approve, which a headless turn never gets; use one of ${HEADLESS_PERMISSION_MODES.join(', ')}`
        : `/permissionMode: must be one of ${HEADLESS_PERMISSION_MODES.join(', ')}`,
    );
  }
  if (s.allowedTools?.some((t) => nul(t) || t.startsWith('-')))
    problems.push('/allowedTools: a tool name must not start with "-" or contain NUL characters');
  if (s.model !== undefined && (nul(s.model) || s.model.startsWith('-')))
    problems.push('/model: must not start with "-" or contain NUL characters');
  problems.push(
    ...envProblems(s.env, (name) =>
      (OWNED_ENV_NAMES as readonly string[]).includes(name)
        ? `is set by Baton (use the ${name === 'CLAUDE_CONFIG_DIR' ? 'configDir' : name === 'ANTHROPIC_API_KEY' ? 'apiKey' : "turn's own"} setting)`
        : null,
    ),
  );
  return problems;
}

export const CLAUDE_CODE_SPEC: ProviderSpec = {
  provider: 'claude_code',
  push: true,
  summary: 'a Claude Code session on this host: each turn is `claude -p --resume <session>` in its working directory',
  settingsSchema: ClaudeCodeSettingsSchema,
  check: checkClaudeCodeSettings,
  redact(settings) {
    const shown: Record<string, unknown> = { ...settings };
    if (settings['apiKey'] !== undefined) shown['apiKey'] = REDACTED;
    if (settings['env'] !== undefined) shown['env'] = redactEnv(settings['env'], ALWAYS_SECRET_ENV);
    return shown;
  },
  // The write is starting a supervisor that starts claude (well under a second on an idle host);
  // observing reads the run record and the session's transcript, local files.
  deadlines: { writeMs: 10_000, observeMs: 10_000, busyMs: 5_000 },
};

const checker = Compile(ClaudeCodeSettingsSchema);

/**
 * An agent's settings, checked again at delivery (they may predate a schema change) and with
 * defaults applied.
 */
export function parseClaudeCodeSettings(
  settings: Readonly<Record<string, unknown>>,
): { ok: true; settings: ClaudeCodeSettings } | { ok: false; problems: string[] } {
  if (!checker.Check(settings)) {
    return { ok: false, problems: [...checker.Errors(settings)].slice(0, 3).map((e) => `${e.instancePath || '/'}: ${e.message}`) };
  }
  const problems = checkClaudeCodeSettings(settings);
  if (problems.length > 0) return { ok: false, problems };
  const s = settings;
  const env = envValues(s.env);
  return {
    ok: true,
    settings: {
      cwd: s.cwd,
      binary: s.binary ?? CLAUDE_CODE_DEFAULTS.binary,
      configDir: s.configDir ?? null,
      allowedTools: s.allowedTools ?? [],
      permissionMode: (s.permissionMode ?? CLAUDE_CODE_DEFAULTS.permissionMode) as ClaudeCodeSettings['permissionMode'],
      model: s.model ?? null,
      apiKey: s.apiKey ?? null,
      env,
      timeoutMs: s.timeoutMs ?? CLAUDE_CODE_DEFAULTS.timeoutMs,
      maxOutputBytes: s.maxOutputBytes ?? CLAUDE_CODE_DEFAULTS.maxOutputBytes,
      unfinishedTurnMs: s.unfinishedTurnMs ?? CLAUDE_CODE_DEFAULTS.unfinishedTurnMs,
    },
  };
}
