import { Type, type Static } from 'typebox';
import { REDACTED } from './provider-spec.ts';

/**
 * The `env` setting of providers that start a process (command, claude_code): NAME -> value, or
 * NAME -> { value, secret: true } for a value that is used but never shown by any read.
 */
export function envSetting(description: string) {
  return Type.Optional(
    Type.Record(
      Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }),
      Type.Union([
        Type.String({ maxLength: 4096 }),
        Type.Object({ value: Type.String({ maxLength: 4096 }), secret: Type.Boolean() }, { additionalProperties: false }),
      ]),
      { additionalProperties: false, description },
    ),
  );
}

export type RawEnv = NonNullable<Static<ReturnType<typeof envSetting>>>;

/** Problems of an `env` the schema accepted: a name Baton sets itself, a NUL in a value. */
export function envProblems(env: RawEnv | undefined, owned: (name: string) => string | null): string[] {
  const problems: string[] = [];
  for (const [name, v] of Object.entries(env ?? {})) {
    const why = owned(name);
    if (why !== null) problems.push(`/env/${name}: ${why}`);
    if ((typeof v === 'string' ? v : v.value).includes('\0')) problems.push(`/env/${name}: must not contain NUL characters`);
  }
  return problems;
}

/** The variables as the process gets them (secrets in clear). */
export function envValues(env: RawEnv | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, v] of Object.entries(env ?? {})) out[name] = typeof v === 'string' ? v : v.value;
  return out;
}

/** The `env` as a read shows it: values marked secret (or named in `alwaysSecret`) as REDACTED. */
export function redactEnv(env: unknown, alwaysSecret: ReadonlySet<string> = new Set()): unknown {
  if (!env || typeof env !== 'object') return env;
  const shown: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(env as Record<string, unknown>)) {
    const marked = typeof v === 'object' && v !== null && (v as { secret?: unknown }).secret === true;
    shown[name] = marked || alwaysSecret.has(name) ? { value: REDACTED, secret: true } : v;
  }
  return shown;
}
