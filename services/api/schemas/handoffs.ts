import { Type, type Static } from 'typebox';
import { LIMITS } from '../../../libs/domain/limits.ts';
import { HandoffUsageJson } from './usage.ts';
import { AllOwners, DeliveryStateSchema, Handle, HandoffJson, Hidden, NullableText, NullableTimestamp, Text, Timestamp } from './common.ts';

/** The handoffs area (routes/handoffs): send, list, read, acknowledge and release. */

/**
 * An agent id, "@project" for unowned work any agent of the project may claim, or
 * "@role:<name>" for one agent of that role, chosen at dispatch time (the name is checked by the
 * use case: 400 invalid_role; a role nobody declares: 422 no_agent_with_role).
 */
export const Recipient = Type.Union([
  Handle,
  Type.Literal('@project'),
  Type.String({
    pattern: '^@role:',
    maxLength: LIMITS.role + 6,
    description: '@role:<name>: one agent of that role, bound at dispatch time',
  }),
]);

export const SendHandoffBody = Type.Object(
  {
    /** Defaults to the token's agent; an agent token naming another is refused. */
    from: Type.Optional(Handle),
    to: Recipient,
    session: Type.Optional(Type.String({ format: 'uuid' })),
    message: Type.String({ minLength: 1, maxLength: LIMITS.message }),
    title: Type.Optional(NullableText(LIMITS.title)),
    focus: Type.Optional(NullableText(LIMITS.focus)),
    doneWhen: Type.Optional(NullableText(LIMITS.doneWhen)),
    context: Type.Optional(
      Type.Object(
        {
          summary: Type.Optional(NullableText(LIMITS.contextSummary)),
          openQuestions: Type.Optional(Type.Array(Text(LIMITS.listItem), { maxItems: LIMITS.listItems })),
          nextSteps: Type.Optional(Type.Array(Text(LIMITS.listItem), { maxItems: LIMITS.listItems })),
        },
        { additionalProperties: false },
      ),
    ),
    dueAt: Type.Optional(NullableTimestamp),
    dueMinutes: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.dueMinutesMax })),
    idempotencyKey: Type.Optional(Type.String({ minLength: 1, maxLength: LIMITS.idempotencyKey })),
  },
  { additionalProperties: false },
);
export type SendHandoffBody = Static<typeof SendHandoffBody>;

export const SendHandoffHeaders = Type.Object({
  'x-baton-project': Type.Optional(Handle),
  'idempotency-key': Type.Optional(Type.String({ minLength: 1, maxLength: LIMITS.idempotencyKey })),
});

export const ListHandoffsQuery = Type.Object(
  {
    recipient: Type.Optional(Handle),
    sender: Type.Optional(Handle),
    to: Type.Optional(Handle),
    from: Type.Optional(Handle),
    state: Type.Optional(Type.String({ maxLength: 400, pattern: '^[A-Z_]+(,[A-Z_]+)*$' })),
    /** 1 to LIMITS.pageSizeMax (query strings are not coerced; the route parses it). */
    limit: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,2}$' })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
    all_owners: AllOwners,
  },
  { additionalProperties: false },
);
export type ListHandoffsQuery = Static<typeof ListHandoffsQuery>;

export const AttemptJson = Type.Object({
  number: Type.Integer(),
  requestId: Type.String(),
  status: Type.String(),
  workerId: Type.Union([Type.String(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  startedAt: Timestamp,
  acceptedAt: NullableTimestamp,
  finishedAt: NullableTimestamp,
});

export const EventJson = Type.Object({
  seq: Type.String(),
  from: Type.Union([DeliveryStateSchema, Type.Null()]),
  to: DeliveryStateSchema,
  workFrom: Type.Union([Type.String(), Type.Null()]),
  workTo: Type.Union([Type.String(), Type.Null()]),
  event: Type.String(),
  /** tokenId: the token that authorised the move (by id; null for Baton's own moves). */
  actor: Type.Object({
    kind: Type.String(),
    id: Type.Union([Type.String(), Type.Null()]),
    tokenId: Type.Union([Type.String(), Type.Null()]),
  }),
  reason: Type.Union([Type.String(), Type.Null()]),
  detail: Type.Unknown(),
  revision: Type.Integer(),
  at: Timestamp,
});

export const HandoffDetailJson = Type.Intersect([
  HandoffJson,
  Type.Object({
    attempts: Type.Array(AttemptJson),
    /** Turn accounting: what each attempt's runtime reported it used, and the sum. */
    usage: HandoffUsageJson,
    events: Type.Array(EventJson),
    notifications: Type.Array(Type.Object({ kind: Type.String(), text: Type.String(), to: Type.String(), createdAt: Timestamp })),
  }),
]);

export const HandoffPageJson = Type.Object({
  items: Type.Array(HandoffJson),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
  /** On the first page only (no cursor). */
  hidden: Hidden,
});

/** `as` defaults to the token's agent; an agent token naming another is refused. */
export const ActAsBody = Type.Object({ as: Type.Optional(Handle) }, { additionalProperties: false });

export const ReleaseBody = Type.Object(
  { as: Type.Optional(Handle), reason: Type.Optional(Type.String({ maxLength: LIMITS.focus })) },
  { additionalProperties: false },
);
