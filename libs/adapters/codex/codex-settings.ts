import { isAbsolute, join } from 'node:path';
import { Type, type Static } from 'typebox';
import { Compile } from 'typebox/compile';
import { CODEX_ENV_NAMES } from '../../domain/inherited-env.ts';
import { envProblems, envSetting, envValues, redactEnv } from '../env-settings.ts';
import type { ProviderSpec } from '../provider-spec.ts';

/** Codex's sandbox modes (app-server `SandboxMode`, @openai/codex 0.171.0). */
export const CODEX_SANDBOXES = ['read-only', 'workspace-write', 'danger-full-access'] as const;

/**
 * The only approval policy Baton runs Codex with. Any other (`untrusted`, `on-request`,
 * `on-failure`, granular) can stop a turn on an approval prompt nobody is there to answer: the
 * thread would sit `active` (waitingOnApproval) and every later handoff would wait as BUSY.
 */
export const CODEX_APPROVAL_POLICY = 'never';

export const CODEX_DEFAULTS = {
  binary: 'codex',
  /**
   * How long a turn that is unfinished on disk and not followed by this worker (another
   * worker's or process's, or one whose daemon was killed hard) counts as live: busy, and observed as
   * running. Codex records no owner for a turn, so this is the only way to tell them apart.
   */
  unfinishedTurnMs: 60 * 60_000,
} as const;

const CodexSettingsSchema = Type.Object(
  {
    cwd: Type.String({
      minLength: 1,
      maxLength: 4096,
      description: 'absolute working directory of the thread (the project Codex works in)',
    }),
    binary: Type.Optional(
      Type.String({ minLength: 1, maxLength: 4096, description: "the codex executable (default: codex on the worker's PATH)" }),
    ),
    codexHome: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 4096,
        description: "absolute CODEX_HOME holding the login and the threads (default: the worker's CODEX_HOME, else ~/.codex)",
      }),
    ),
    sandbox: Type.Optional(
      Type.Union(
        CODEX_SANDBOXES.map((s) => Type.Literal(s)),
        { description: "Codex sandbox mode (default: the Codex home's config)" },
      ),
    ),
    approvalPolicy: Type.Optional(
      Type.String({ maxLength: 64, description: 'must be "never": any other policy can wait on a prompt nobody answers' }),
    ),
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "model slug (default: the Codex home's config)" })),
    unfinishedTurnMs: Type.Optional(
      Type.Integer({ minimum: 1_000, maximum: 86_400_000, description: 'how long an unfinished turn Baton did not start counts as live' }),
    ),
    env: envSetting("variables for the Codex home's app-server daemon (which runs the turns), NAME -> value or { value, secret: true }"),
  },
  { additionalProperties: false },
);

export type CodexSettings = Static<typeof CodexSettingsSchema>;

const check = Compile(CodexSettingsSchema);

/** Values a read never shows even when `env` does not mark them secret. */
const ALWAYS_SECRET_ENV = new Set(['OPENAI_API_KEY', 'CODEX_API_KEY', 'AZURE_OPENAI_API_KEY']);

/** Why Baton sets the variable itself, or null: the Codex home has its own setting, BATON_* are Baton's. */
function ownedEnvName(name: string): string | null {
  if (name === 'CODEX_HOME') return 'is set by Baton (use the codexHome setting)';
  if (name.startsWith('BATON_')) return 'is a name Baton keeps for itself';
  return null;
}

function problems(settings: Readonly<Record<string, unknown>>): string[] {
  const out: string[] = [];
  for (const key of ['cwd', 'codexHome'] as const) {
    const v = settings[key];
    if (typeof v === 'string' && !isAbsolute(v)) out.push(`/${key}: must be an absolute path`);
  }
  const policy = settings['approvalPolicy'];
  if (policy !== undefined && policy !== CODEX_APPROVAL_POLICY) {
    out.push(
      `/approvalPolicy: ${JSON.stringify(policy)} can stop a headless turn on an approval prompt nobody answers; Baton runs Codex only with "never"`,
    );
  }
  out.push(...envProblems(settings['env'] as CodexSettings['env'], ownedEnvName));
  return out;
}

/** The settings if valid, else a message naming the problems (the adapter refuses such a turn). */
export function parseCodexSettings(
  settings: Readonly<Record<string, unknown>>,
): { ok: true; settings: CodexSettings } | { ok: false; error: string } {
  if (!check.Check(settings)) {
    return {
      ok: false,
      error: [...check.Errors(settings)]
        .slice(0, 3)
        .map((e) => `${e.instancePath || '/'}: ${e.message}`)
        .join('; '),
    };
  }
  const extra = problems(settings);
  return extra.length > 0 ? { ok: false, error: extra.join('; ') } : { ok: true, settings: settings };
}

/** The agent's `env` as the daemon gets it (secrets in clear; only the adapter sees these). */
export function codexEnvOf(settings: CodexSettings): Record<string, string> {
  return envValues(settings.env);
}

/** The Codex home a turn uses: the setting, else the worker's CODEX_HOME, else ~/.codex. */
export function codexHomeOf(settings: CodexSettings, baseEnv: Readonly<Record<string, string>>): string {
  return settings.codexHome ?? baseEnv['CODEX_HOME'] ?? join(baseEnv['HOME'] ?? '/', '.codex');
}

/**
 * What `codex app-server daemon start` (and a daemon this worker starts) inherits from the worker: what a program gets (PATH, HOME, locale...),
 * the worker's CODEX_HOME, and the proxy and CA variables a host's network needs. Never the
 * worker's DATABASE_URL, REDIS_URL or tokens. The login lives in the Codex home.
 */
export const CODEX_INHERITED_ENV_NAMES = CODEX_ENV_NAMES;

export function codexInheritedEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of CODEX_INHERITED_ENV_NAMES) {
    const v = env[name];
    if (v !== undefined && v !== '') out[name] = v;
  }
  return out;
}

export const CODEX_SPEC: ProviderSpec = {
  provider: 'codex',
  push: true,
  summary: "a Codex thread, one new turn per handoff through the Codex home's app-server daemon, shared by the workers of that host",
  settingsSchema: CodexSettingsSchema,
  check: problems,
  redact(settings) {
    return settings['env'] === undefined ? { ...settings } : { ...settings, env: redactEnv(settings['env'], ALWAYS_SECRET_ENV) };
  },
  // A write may start the daemon and resume the thread first (about 0.7 s on a warm host).
  deadlines: { writeMs: 30_000, observeMs: 15_000, busyMs: 10_000 },
};
