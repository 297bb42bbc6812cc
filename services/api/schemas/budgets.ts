import { Type } from 'typebox';
import { Handle, Timestamp } from './common.ts';

/** The budgets area (routes/budgets): a project's, or an agent's, spending per UTC day. */

const Limit = Type.Union([Type.Number(), Type.Null()]);

export const BudgetJson = Type.Object({
  /** null: the project's budget, over all its agents. */
  agent: Type.Union([Type.String(), Type.Null()]),
  tokensPerDay: Limit,
  usdPerDay: Limit,
  spentToday: Type.Object({ tokens: Type.Number(), usd: Type.Number() }),
  /** Why new turns it covers are HELD now (`budget: ...`), or null while it is not spent. */
  holding: Type.Union([Type.String(), Type.Null()]),
  resetsAt: Timestamp,
  updatedAt: Timestamp,
});

export const BudgetsJson = Type.Object({ items: Type.Array(BudgetJson) });

/** Limits are checked by libs/domain/budgets.ts (400 invalid_budget), not by the schema. */
export const BudgetBody = Type.Object(
  { agent: Type.Optional(Handle), tokensPerDay: Type.Optional(Type.Unknown()), usdPerDay: Type.Optional(Type.Unknown()) },
  { additionalProperties: false },
);

export const BudgetQuery = Type.Object({ agent: Type.Optional(Handle) }, { additionalProperties: false });
