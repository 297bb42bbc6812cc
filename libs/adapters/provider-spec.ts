import type { TSchema } from 'typebox';

/**
 * Deadlines of the three adapter calls, in milliseconds. The engine (libs/handoffs) enforces
 * them: a write past its deadline is `lost` (UNCERTAIN, reconciled by observation, never resent
 * blindly); an observation or busy question past its deadline counts as "could not ask".
 */
export interface AdapterDeadlines {
  readonly writeMs: number;
  readonly observeMs: number;
  readonly busyMs: number;
}

/** Marks a settings value as secret: it is kept and used, and never shown by any read. */
export const REDACTED = '[redacted]';

/**
 * What Baton knows about a provider before any adapter runs: the schema of an agent's
 * `settings` (unknown keys and ill-typed values are refused with `invalid_settings`), which of
 * those values are secrets, and the default deadlines of its adapter calls. One spec per
 * provider, listed in provider-specs.ts.
 */
export interface ProviderSpec {
  readonly provider: string;
  /** true: a worker delivers turns through an adapter; false (manual): receivers pull. */
  readonly push: boolean;
  /** TypeBox schema of the agent's settings; objects in it refuse unknown keys. */
  readonly settingsSchema: TSchema;
  /**
   * Extra checks the schema cannot say (e.g. "the argv must not be empty", "a relative cwd"),
   * returning a message per problem; none means valid.
   */
  readonly check?: (settings: Readonly<Record<string, unknown>>) => readonly string[];
  /** A copy of the settings with every secret value replaced by REDACTED. */
  readonly redact: (settings: Readonly<Record<string, unknown>>) => Record<string, unknown>;
  /** Where the settings do not say otherwise. */
  readonly deadlines: AdapterDeadlines;
  /** One line for `baton agent add --help` and the docs. */
  readonly summary: string;
}

/** For providers without secrets. */
export const noSecrets = (settings: Readonly<Record<string, unknown>>): Record<string, unknown> => ({ ...settings });
