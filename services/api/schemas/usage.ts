import { Type } from 'typebox';
import { Handle, NullableTimestamp, Timestamp } from './common.ts';

/** Turn accounting (libs/domain/turn-usage.ts): a turn's reported usage, per handoff and per agent over time. */

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
