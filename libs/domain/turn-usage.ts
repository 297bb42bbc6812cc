/**
 * What a runtime reported a turn used: its model, tokens by kind and cost. Every field is
 * optional because runtimes report different parts (Claude Code: all of them, its cost computed
 * by the CLI; Codex: tokens and model, no cost). Stored per attempt (`delivery_attempts`),
 * summed per handoff, agent and project when read (docs/API.md, "Turn usage").
 */
export interface TurnUsage {
  readonly model?: string;
  /** Input tokens not read from a cache (Anthropic's `input_tokens`; Codex's input less its cached part). */
  readonly inputTokens?: number;
  readonly outputTokens?: number;
  /** Input tokens read from the prompt cache. */
  readonly cacheReadTokens?: number;
  /** Input tokens written to the prompt cache. */
  readonly cacheWriteTokens?: number;
  /** What the runtime said the turn cost, in US dollars (never computed by Baton). */
  readonly costUsd?: number;
}

/** The token counts of a usage, in the order they are stored and shown. */
export const TOKEN_KINDS = ['inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheWriteTokens'] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

/** Limits of a reported usage: a count is a whole number up to 10^12, a cost up to 10^6 USD, a model name up to 200 characters. */
export const USAGE_LIMITS = { maxTokens: 1_000_000_000_000, maxCostUsd: 1_000_000, modelName: 200 } as const;

/** Whether a usage reports anything at all. */
export function reportsUsage(u: TurnUsage | undefined): u is TurnUsage {
  return u !== undefined && (u.model !== undefined || u.costUsd !== undefined || TOKEN_KINDS.some((k) => u[k] !== undefined));
}

/**
 * A count as a runtime sent it, when it is a usable one (a whole number in range); anything else
 * is left out rather than stored wrong. For the adapters reading a runtime's own report.
 */
export function countOf(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= USAGE_LIMITS.maxTokens ? v : undefined;
}

/** A cost as a runtime sent it, when it is a usable one. */
export function costOf(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= USAGE_LIMITS.maxCostUsd ? v : undefined;
}

/**
 * A usage built from what a runtime sent, keeping only the usable parts (a count that is not a
 * whole number in range, a cost that is not a finite non-negative number, a model that is not a
 * string are left out; so `{}` reports nothing).
 */
export function usageOf(parts: Partial<Record<keyof TurnUsage, unknown>>): TurnUsage {
  const out: { -readonly [K in keyof TurnUsage]: TurnUsage[K] } = {};
  if (typeof parts.model === 'string' && parts.model.length > 0) out.model = parts.model.slice(0, USAGE_LIMITS.modelName);
  for (const k of TOKEN_KINDS) {
    const n = countOf(parts[k]);
    if (n !== undefined) out[k] = n;
  }
  const c = costOf(parts.costUsd);
  if (c !== undefined) out.costUsd = c;
  return out;
}

/** Totals over several turns: tokens and cost summed (a field no turn reported stays absent), turns and seconds counted. */
export interface UsageTotals {
  readonly turns: number;
  /** Wall time of the counted turns, accepted to finished, in milliseconds. */
  readonly turnMs: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cacheReadTokens: number;
  readonly cacheWriteTokens: number;
  /** Null when no counted turn reported a cost. */
  readonly costUsd: number | null;
}

/** One attempt's usage as it is read back: the usage plus its wall time (null while unfinished). */
export interface AttemptUsage extends TurnUsage {
  readonly turnMs: number | null;
}

/** Sums attempts' usage (a turn counts when it has a wall time). */
export function sumUsage(items: readonly AttemptUsage[]): UsageTotals {
  let turns = 0;
  let turnMs = 0;
  let cost: number | null = null;
  const tokens = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
  for (const u of items) {
    if (u.turnMs !== null) {
      turns++;
      turnMs += u.turnMs;
    }
    for (const k of TOKEN_KINDS) tokens[k] += u[k] ?? 0;
    if (u.costUsd !== undefined) cost = (cost ?? 0) + u.costUsd;
  }
  return { turns, turnMs, ...tokens, costUsd: cost === null ? null : roundCost(cost) };
}

/** Sums of costs are rounded to a billionth of a dollar, so they do not show float noise (one turn's cost is kept as reported). */
export function roundCost(usd: number): number {
  return Math.round(usd * 1e9) / 1e9;
}

/** The fields of a reported usage (a webhook's `usage`), in the order they are documented. */
const REPORTED_FIELDS: readonly (keyof TurnUsage)[] = ['model', ...TOKEN_KINDS, 'costUsd'];

/**
 * A usage as an agent reported it over the wire (a webhook callback's `usage`: docs/API.md,
 * "Turn usage"), checked field by field: the usage, or what is wrong with it (an unknown field, a
 * count that is not a whole number from 0 to 10^12, a cost that is not a number from 0 to 10^6, a
 * model that is not a string of 1 to 200 characters).
 */
export function checkReportedUsage(value: unknown): { readonly usage: TurnUsage } | { readonly problem: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { problem: 'usage must be an object' };
  const v = value as Record<string, unknown>;
  const unknown = Object.keys(v).filter((k) => !(REPORTED_FIELDS as readonly string[]).includes(k));
  if (unknown.length > 0) return { problem: `usage has unknown fields: ${unknown.join(', ')} (known: ${REPORTED_FIELDS.join(', ')})` };
  const usage = usageOf(v);
  for (const k of REPORTED_FIELDS) {
    if (v[k] !== undefined && usage[k] === undefined) {
      const what =
        k === 'model'
          ? `a string of 1 to ${USAGE_LIMITS.modelName} characters`
          : k === 'costUsd'
            ? `a number from 0 to ${USAGE_LIMITS.maxCostUsd}`
            : `a whole number from 0 to ${USAGE_LIMITS.maxTokens}`;
      return { problem: `usage.${k} must be ${what}` };
    }
  }
  if (typeof v['model'] === 'string' && v['model'].length > USAGE_LIMITS.modelName) {
    return { problem: `usage.model must be a string of 1 to ${USAGE_LIMITS.modelName} characters` };
  }
  return { usage };
}
