import { Type } from 'typebox';
import { LIMITS } from '../../../libs/domain/limits.ts';
import { AllOwners, FactId, Handle, Id, Timestamp } from './common.ts';

/** The sessions area (routes/sessions): sessions and their facts. */

export const SessionBody = Type.Object(
  {
    as: Type.Optional(Handle),
    title: Type.String({ minLength: 1, maxLength: LIMITS.title }),
    summary: Type.Optional(Type.String({ maxLength: LIMITS.contextSummary })),
  },
  { additionalProperties: false },
);
export const FactBody = Type.Object(
  {
    as: Type.Optional(Handle),
    kind: Type.Enum(['decision', 'failed_attempt', 'lesson', 'open_question', 'note', 'result']),
    text: Type.String({ minLength: 1, maxLength: LIMITS.factText }),
    supersedes: Type.Optional(FactId),
  },
  { additionalProperties: false },
);
export const SessionParams = Type.Object({ id: Id });
export const FactJson = Type.Object({
  id: Type.String(),
  kind: Type.String(),
  text: Type.String(),
  author: Type.String(),
  supersedes: Type.Union([Type.String(), Type.Null()]),
  supersededBy: Type.Union([Type.String(), Type.Null()]),
  createdAt: Timestamp,
});
export const SessionJson = Type.Object({
  id: Type.String(),
  title: Type.String(),
  summary: Type.Union([Type.String(), Type.Null()]),
  createdAt: Timestamp,
});
export const SessionListQuery = Type.Object(
  {
    /** 1 to LIMITS.pageSizeMax (query strings are not coerced; the route parses it). */
    limit: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,2}$' })),
    all_owners: AllOwners,
  },
  { additionalProperties: false },
);
export const SessionListJson = Type.Object({
  items: Type.Array(
    Type.Object({
      id: Type.String(),
      title: Type.String(),
      summary: Type.Union([Type.String(), Type.Null()]),
      createdAt: Timestamp,
      facts: Type.Integer(),
      handoffs: Type.Integer({ description: 'the handoffs of the session the caller may see (all_owners)' }),
    }),
  ),
});
export const SessionDetailJson = Type.Object({
  session: SessionJson,
  facts: Type.Array(FactJson),
  handoffs: Type.Array(
    Type.Object({
      id: Type.String(),
      title: Type.Union([Type.String(), Type.Null()]),
      from: Type.String(),
      to: Type.Union([Type.String(), Type.Null()]),
      deliveryState: Type.String(),
      workState: Type.Union([Type.String(), Type.Null()]),
      createdAt: Timestamp,
    }),
  ),
});
