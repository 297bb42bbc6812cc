import { Type } from 'typebox';
import { USAGE_LIMITS } from '../../../libs/domain/turn-usage.ts';
import { Handle, NullableTimestamp, Timestamp } from './common.ts';

/** Turn accounting (libs/domain/turn-usage.ts): a turn's reported usage, per handoff and per agent over time. */

const Count = Type.Integer({ minimum: 0, maximum: USAGE_LIMITS.maxTokens });
const Cost = Type.Number({ minimum: 0, maximum: USAGE_LIMITS.maxCostUsd });
const Model = Type.String({ minLength: 1, maxLength: USAGE_LIMITS.modelName });

/**
 * What a webhook callback (and a command's usage file) may report a turn used: the fields of
 * `TurnUsage`, each optional. Checked again by `checkTurnUsage`, which the adapters' readers use.
 */
export const TurnUsageBody = Type.Object(
  {
    model: Type.Optional(Model),
    inputTokens: Type.Optional(Count),
    outputTokens: Type.Optional(Count),
    cacheReadTokens: Type.Optional(Count),
    cacheWriteTokens: Type.Optional(Count),
    costUsd: Type.Optional(Cost),
  },
  { additionalProperties: false },
);

const Nullable = <T extends ReturnType<typeof Type.Number>>(t: T) => Type.Union([t, Type.Null()]);

export const UsageTotalsJson = Type.Object({
  turns: Type.Integer({ minimum: 0 }),
  turnSeconds: Type.Number({ minimum: 0 }),
  inputTokens: Type.Number({ minimum: 0 }),
  outputTokens: Type.Number({ minimum: 0 }),
  cacheReadTokens: Type.Number({ minimum: 0 }),
  cacheWriteTokens: Type.Number({ minimum: 0 }),
  costUsd: Nullable(Type.Number({ minimum: 0 })),
});

export const AttemptUsageJson = Type.Object({
  number: Type.Integer({ minimum: 1 }),
  status: Type.String(),
  model: Type.Union([Type.String(), Type.Null()]),
  acceptedAt: NullableTimestamp,
  finishedAt: NullableTimestamp,
  /** Accepted to finished, for a turn that ran and ended; null otherwise. */
  turnSeconds: Nullable(Type.Number({ minimum: 0 })),
  inputTokens: Nullable(Type.Number({ minimum: 0 })),
  outputTokens: Nullable(Type.Number({ minimum: 0 })),
  cacheReadTokens: Nullable(Type.Number({ minimum: 0 })),
  cacheWriteTokens: Nullable(Type.Number({ minimum: 0 })),
  costUsd: Nullable(Type.Number({ minimum: 0 })),
});

export const HandoffUsageJson = Type.Object({ attempts: Type.Array(AttemptUsageJson), total: UsageTotalsJson });

export const UsageQuery = Type.Object(
  {
    agent: Type.Optional(Handle),
    /** ISO 8601; default: the start of today (UTC). */
    since: Type.Optional(Timestamp),
    /** ISO 8601; default: now. */
    until: Type.Optional(Timestamp),
    project: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
);

export const UsageRowJson = Type.Intersect([
  Type.Object({ agent: Type.String(), provider: Type.String(), model: Type.Union([Type.String(), Type.Null()]) }),
  UsageTotalsJson,
]);

export const UsageReportJson = Type.Object({
  project: Type.String(),
  agent: Type.Union([Type.String(), Type.Null()]),
  since: Timestamp,
  until: Timestamp,
  rows: Type.Array(UsageRowJson),
  total: UsageTotalsJson,
});
