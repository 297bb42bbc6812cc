import { Type } from 'typebox';
import { DELIVERY_STATES } from '../../../libs/domain/delivery-states.ts';
import { HANDLE_PATTERN } from '../../../libs/domain/ids.ts';
import { LIMITS } from '../../../libs/domain/limits.ts';

/**
 * What every route area shares: handles and ids, timestamps, bounded text, the error envelope,
 * the project header, `all_owners`, and the handoff as every area returns it. Limits come from
 * libs/domain/limits.ts.
 */

export const Handle = Type.String({ minLength: 1, maxLength: LIMITS.handle, pattern: HANDLE_PATTERN });
export const DeliveryStateSchema = Type.Enum(DELIVERY_STATES);
export const Text = (max: number) => Type.String({ maxLength: max });
export const NullableText = (max: number) => Type.Union([Type.String({ maxLength: max }), Type.Null()]);
export const Timestamp = Type.String({ format: 'date-time' });
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

export const ErrorBody = Type.Object({
  error: Type.Object({ code: Type.String(), message: Type.String(), details: Type.Optional(Type.Unknown()) }),
});

export const ProjectHeader = Type.Object({
  'x-baton-project': Type.Optional(Handle),
});

/** Ids are UUIDs; anything else is refused as malformed before any lookup. */
export const Id = Type.String({ format: 'uuid' });
export const FactId = Type.String({ format: 'uuid' });
export const HandoffParams = Type.Object({ id: Id });
export const AgentParams = Type.Object({ id: Handle });

/** Admins only: every handoff of the project, whoever owns it. */
export const AllOwners = Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')]));
export const AllOwnersQuery = Type.Object({ all_owners: AllOwners }, { additionalProperties: false });

/** An admin token's narrowed view (no `all_owners`) only: how many the same query hides. */
export const Hidden = Type.Optional(
  Type.Integer({
    minimum: 0,
    description: 'admin tokens without all_owners only: handoffs this query matches that the view hides (all_owners=true shows them)',
  }),
);

export const HandoffJson = Type.Object({
  id: Type.String(),
  seq: Type.String(),
  from: Type.String(),
  to: Type.Union([Type.String(), Type.Null()]),
  /** The role it was sent to (`@role:<name>`); `to` is null until it is bound to an agent. */
  toRole: Type.Union([Type.String(), Type.Null()]),
  /** When the current role binding was made (null while unbound, and for handoffs not sent to a role). */
  routedAt: NullableTimestamp,
  title: Type.Union([Type.String(), Type.Null()]),
  message: Type.String(),
  focus: Type.Union([Type.String(), Type.Null()]),
  doneWhen: Type.Union([Type.String(), Type.Null()]),
  context: Type.Object({
    summary: Type.Union([Type.String(), Type.Null()]),
    openQuestions: Type.Array(Type.String()),
    nextSteps: Type.Array(Type.String()),
  }),
  dueAt: NullableTimestamp,
  reminderSentAt: NullableTimestamp,
  idempotencyKey: Type.Union([Type.String(), Type.Null()]),
  state: DeliveryStateSchema,
  deliveryState: DeliveryStateSchema,
  workState: Type.Union([Type.String(), Type.Null()]),
  work: Type.Union([
    Type.Object({
      state: Type.String(),
      attempt: Type.Integer(),
      revision: Type.Integer(),
      claimedBy: Type.Union([Type.String(), Type.Null()]),
      leaseExpiresAt: NullableTimestamp,
      returnOutcome: Type.Union([Type.String(), Type.Null()]),
      resolution: Type.Union([Type.String(), Type.Null()]),
      note: Type.Union([Type.String(), Type.Null()]),
      resultFactIds: Type.Array(Type.String()),
      returnedAt: NullableTimestamp,
    }),
    Type.Null(),
  ]),
  sessionId: Type.Union([Type.String(), Type.Null()]),
  detail: Type.Union([Type.String(), Type.Null()]),
  revision: Type.Integer(),
  attemptCount: Type.Integer(),
  duplicateOf: Type.Union([Type.String(), Type.Null()]),
  result: Type.Union([Type.Object({ summary: Type.Union([Type.String(), Type.Null()]), output: Type.Unknown() }), Type.Null()]),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  settledAt: NullableTimestamp,
});
