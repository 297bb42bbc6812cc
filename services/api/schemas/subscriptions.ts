import { Type } from 'typebox';

import { DeliveryStateSchema, Handle, Id, NullableTimestamp, Timestamp } from './common.ts';

/** The subscriptions area (routes/subscriptions): signed event subscriptions and their dead letters. */

const EventKind = Type.String({ minLength: 1, maxLength: 40, pattern: '^[a-z_]+$' });
/** An event id (handoff_events.id) as a decimal string. */
const EventId = Type.String({ pattern: '^(0|[1-9][0-9]{0,18})$' });

export const SubscriptionFilterSchema = Type.Object(
  {
    handoffId: Type.Optional(Id),
    agents: Type.Optional(Type.Array(Handle, { minItems: 1, maxItems: 50 })),
    states: Type.Optional(Type.Array(DeliveryStateSchema, { minItems: 1, maxItems: 20 })),
    events: Type.Optional(Type.Array(EventKind, { minItems: 1, maxItems: 50 })),
  },
  { additionalProperties: false },
);

export const SubscriptionBody = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2000 }),
    filter: Type.Optional(SubscriptionFilterSchema),
    /** Deliver the events after this id ("0": the whole log); absent: only events from now on. */
    after: Type.Optional(EventId),
  },
  { additionalProperties: false },
);

export const ReplayBody = Type.Object(
  {
    /** Deliver again from just after this event id; absent: from the oldest dead letter. */
    after: Type.Optional(EventId),
  },
  { additionalProperties: false },
);

export const SubscriptionParams = Type.Object({ id: Id });
export const SubscriptionListQuery = Type.Object(
  { limit: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,2}$' })) },
  { additionalProperties: false },
);

export const SubscriptionJson = Type.Object({
  id: Type.String(),
  url: Type.String(),
  /** The agent that owns it; null: an admin's (every handoff of the project). */
  owner: Type.Union([Type.String(), Type.Null()]),
  filter: SubscriptionFilterSchema,
  /** webhook: Baton's event envelope; a2a_push: an A2A push-notification config of the task `filter.handoffId`. */
  kind: Type.Enum(['webhook', 'a2a_push']),
  status: Type.Enum(['active', 'paused']),
  pausedReason: Type.Union([Type.String(), Type.Null()]),
  /** The last event id delivered or given up on. */
  position: Type.String(),
  attempts: Type.Integer(),
  failingSince: NullableTimestamp,
  nextAttemptAt: NullableTimestamp,
  lastError: Type.Union([Type.String(), Type.Null()]),
  deadLetters: Type.Integer(),
  createdAt: Timestamp,
});

export const CreatedSubscriptionJson = Type.Object({
  subscription: SubscriptionJson,
  /** The signing secret: shown in this answer only. */
  secret: Type.String(),
});
export const SubscriptionListJson = Type.Object({ items: Type.Array(SubscriptionJson) });
export const DeadLetterJson = Type.Object({
  eventId: Type.String(),
  lastError: Type.String(),
  attempts: Type.Integer(),
  createdAt: Timestamp,
});
export const SubscriptionDetailJson = Type.Object({ subscription: SubscriptionJson, deadLetters: Type.Array(DeadLetterJson) });
export const ReplayJson = Type.Object({ subscription: SubscriptionJson, replayed: Type.Boolean() });
export const SubscriptionOnlyJson = Type.Object({ subscription: SubscriptionJson });
export const ResumeBody = Type.Object({}, { additionalProperties: false });
