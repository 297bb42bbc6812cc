import { Type, type Static } from 'typebox';
import { DELIVERY_STATES } from '../../libs/domain/delivery-states.ts';
import { HANDLE_PATTERN, POOL_PATTERN } from '../../libs/domain/ids.ts';
import { LIMITS } from '../../libs/domain/limits.ts';
import { PROVIDER_NAMES } from '../../libs/db/records.ts';

/** JSON schemas shared by the routes. Limits come from libs/domain/limits.ts. */

export const Handle = Type.String({ minLength: 1, maxLength: LIMITS.handle, pattern: HANDLE_PATTERN });
export const DeliveryStateSchema = Type.Enum(DELIVERY_STATES);
export const ProviderSchema = Type.Enum(PROVIDER_NAMES);
const Text = (max: number) => Type.String({ maxLength: max });
const NullableText = (max: number) => Type.Union([Type.String({ maxLength: max }), Type.Null()]);
const Timestamp = Type.String({ format: 'date-time' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

export const ErrorBody = Type.Object({
  error: Type.Object({ code: Type.String(), message: Type.String(), details: Type.Optional(Type.Unknown()) }),
});

export const ProjectHeader = Type.Object({
  'x-baton-project': Type.Optional(Handle),
});

// ---- agents

export const RegisterAgentBody = Type.Object(
  {
    id: Handle,
    displayName: Type.Optional(Type.String({ minLength: 1, maxLength: LIMITS.displayName })),
    provider: ProviderSchema,
    settings: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    target: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: LIMITS.deliveryTarget }), Type.Null()])),
    /** Worker pool (host affinity); "default" or absent: the unnamed pool. */
    pool: Type.Optional(Type.String({ pattern: POOL_PATTERN })),
  },
  { additionalProperties: false },
);
export type RegisterAgentBody = Static<typeof RegisterAgentBody>;

export const AgentJson = Type.Object({
  id: Type.String(),
  displayName: Type.String(),
  provider: Type.String(),
  settings: Type.Record(Type.String(), Type.Unknown()),
  target: Type.Union([Type.String(), Type.Null()]),
  /** "default" is the unnamed pool. */
  pool: Type.String(),
  /** The deployment (Redis prefix) that registered the agent: only its workers deliver to it. */
  deployment: Type.String(),
  generation: Type.Integer(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const AgentParams = Type.Object({ id: Handle });

// ---- handoffs

/** An agent id, or "@project" for unowned work any agent of the project may claim. */
export const Recipient = Type.Union([Handle, Type.Literal('@project')]);

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

/** Ids are UUIDs; anything else is refused as malformed before any lookup. */
export const Id = Type.String({ format: 'uuid' });
export const HandoffParams = Type.Object({ id: Id });

/** Admins only: every handoff of the project, whoever owns it. */
const AllOwners = Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')]));
export const AllOwnersQuery = Type.Object({ all_owners: AllOwners }, { additionalProperties: false });

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

export const HandoffJson = Type.Object({
  id: Type.String(),
  seq: Type.String(),
  from: Type.String(),
  to: Type.Union([Type.String(), Type.Null()]),
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
  actor: Type.Object({ kind: Type.String(), id: Type.Union([Type.String(), Type.Null()]), tokenId: Type.Union([Type.String(), Type.Null()]) }),
  reason: Type.Union([Type.String(), Type.Null()]),
  detail: Type.Unknown(),
  revision: Type.Integer(),
  at: Timestamp,
});

export const HandoffDetailJson = Type.Intersect([
  HandoffJson,
  Type.Object({
    attempts: Type.Array(AttemptJson),
    events: Type.Array(EventJson),
    notifications: Type.Array(Type.Object({ kind: Type.String(), text: Type.String(), to: Type.String(), createdAt: Timestamp })),
  }),
]);

/** An admin token's narrowed view (no `all_owners`) only: how many the same query hides. */
const Hidden = Type.Optional(Type.Integer({ minimum: 0, description: 'admin tokens without all_owners only: handoffs this query matches that the view hides (all_owners=true shows them)' }));

export const HandoffPageJson = Type.Object({
  items: Type.Array(HandoffJson),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
  /** On the first page only (no cursor). */
  hidden: Hidden,
});

export const StatusJson = Type.Object({
  project: Type.String(),
  total: Type.Integer(),
  byState: Type.Record(Type.String(), Type.Integer()),
  hidden: Hidden,
});

// ---- actions on a handoff

/** `as` defaults to the token's agent; an agent token naming another is refused. */
export const ActAsBody = Type.Object({ as: Type.Optional(Handle) }, { additionalProperties: false });

export const ReleaseBody = Type.Object(
  { as: Type.Optional(Handle), reason: Type.Optional(Type.String({ maxLength: LIMITS.focus })) },
  { additionalProperties: false },
);

export const NotificationJson = Type.Object({
  id: Type.String(),
  handoffId: Type.String(),
  kind: Type.String(),
  text: Type.String(),
  createdAt: Timestamp,
  readAt: NullableTimestamp,
});

export const InboxJson = Type.Object({
  agent: Type.String(),
  handoffs: Type.Array(HandoffJson),
  notifications: Type.Array(NotificationJson),
});

// ---- settings and connections

export const SettingsJson = Type.Object({
  enabled: Type.Boolean(),
  enabledAfter: NullableTimestamp,
  connections: Type.Union([Type.Literal('open'), Type.Literal('restricted')]),
  outageGuard: Type.Record(Type.String(), Type.Unknown()),
});

export const SettingParams = Type.Object({ key: Type.String({ minLength: 1, maxLength: 64 }) });
export const SettingBody = Type.Object({ value: Type.Unknown() }, { additionalProperties: false, required: ['value'] });

export const ConnectionBody = Type.Object(
  { from: Handle, to: Handle, rule: Type.Union([Type.Literal('allow'), Type.Literal('block')]) },
  { additionalProperties: false },
);

export const ConnectionsJson = Type.Object({
  items: Type.Array(Type.Object({ from: Type.String(), to: Type.String(), rule: Type.String(), updatedAt: Timestamp })),
});

// ---- work contracts

const LeaseSeconds = Type.Integer({ minimum: 1, maximum: 86_400 });
export const FactId = Type.String({ format: 'uuid' });

export const AcceptBody = Type.Object({ as: Type.Optional(Handle), leaseSeconds: Type.Optional(LeaseSeconds) }, { additionalProperties: false });
export const HeartbeatBody = Type.Object({ as: Type.Optional(Handle), claimToken: Type.String({ minLength: 1, maxLength: 100 }), leaseSeconds: Type.Optional(LeaseSeconds) }, { additionalProperties: false });
export const ReturnBody = Type.Object(
  {
    as: Type.Optional(Handle),
    claimToken: Type.String({ minLength: 1, maxLength: 100 }),
    revision: Type.Optional(Type.Integer({ minimum: 0 })),
    summary: Type.String({ minLength: 1, maxLength: LIMITS.contextSummary }),
    outcome: Type.Optional(Type.Union([Type.Literal('succeeded'), Type.Literal('failed')])),
    facts: Type.Optional(Type.Array(FactId, { maxItems: LIMITS.listItems })),
  },
  { additionalProperties: false },
);
export const CloseBody = Type.Object(
  {
    as: Type.Optional(Handle),
    resolution: Type.Union([Type.Literal('accepted'), Type.Literal('revision'), Type.Literal('blocked')]),
    note: Type.Optional(Type.String({ maxLength: LIMITS.focus })),
    revision: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);
export const AsQuery = Type.Object({ as: Type.Optional(Handle), all_owners: AllOwners }, { additionalProperties: false });

export const PacketJson = Type.Object({ text: Type.String(), factIds: Type.Array(Type.String()), omittedFacts: Type.Integer(), truncated: Type.Boolean() });

export const ClaimJson = Type.Object({
  handoff: HandoffJson,
  claim: Type.Object({ token: Type.String(), attempt: Type.Integer(), leaseExpiresAt: Timestamp }),
  packet: PacketJson,
  recovered: Type.Boolean(),
});

export const ReturnJson = Type.Object({ handoff: HandoffJson, recovered: Type.Boolean() });

export const HandoffListJson = Type.Object({ agent: Type.String(), handoffs: Type.Array(HandoffJson) });

export const CardJson = Type.Object({
  handoff: HandoffJson,
  lane: Type.String(),
  reasons: Type.Array(Type.String()),
  next: Type.Object({ action: Type.String(), who: Type.String() }),
});
export const BoardJson = Type.Object({
  ready: Type.Array(CardJson),
  in_progress: Type.Array(CardJson),
  attention: Type.Array(CardJson),
  returned: Type.Array(CardJson),
});
export const BoardQuery = Type.Object({ agent: Type.Optional(Handle), all_owners: AllOwners }, { additionalProperties: false });

// ---- sessions and facts

export const SessionBody = Type.Object(
  { as: Type.Optional(Handle), title: Type.String({ minLength: 1, maxLength: LIMITS.title }), summary: Type.Optional(Type.String({ maxLength: LIMITS.contextSummary })) },
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
    Type.Object({ id: Type.String(), title: Type.Union([Type.String(), Type.Null()]), from: Type.String(), to: Type.Union([Type.String(), Type.Null()]), deliveryState: Type.String(), workState: Type.Union([Type.String(), Type.Null()]), createdAt: Timestamp }),
  ),
});

// ---- identity: tokens, projects, who am I

export const CreateTokenBody = Type.Object(
  {
    /** The agent the token acts as; omitted with `admin: true`. */
    agent: Type.Optional(Handle),
    project: Type.Optional(Handle),
    admin: Type.Optional(Type.Boolean()),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: LIMITS.tokenName })),
  },
  { additionalProperties: false },
);
export const TokenJson = Type.Object({
  id: Type.String(),
  name: Type.String(),
  admin: Type.Boolean(),
  project: Type.Union([Type.String(), Type.Null()]),
  agent: Type.Union([Type.String(), Type.Null()]),
  /** The agent's generation the token was issued to; removing the agent ends it for good. */
  agentGeneration: Type.Union([Type.Integer(), Type.Null()]),
  createdAt: Timestamp,
  lastUsedAt: NullableTimestamp,
  revokedAt: NullableTimestamp,
});
/** The only response that carries a token's secret: the one that created it. */
export const CreatedTokenJson = Type.Object({ token: Type.String(), record: TokenJson });
export const TokenParams = Type.Object({ id: Id });
export const TokenListQuery = Type.Object(
  { project: Type.Optional(Handle), all: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])) },
  { additionalProperties: false },
);

export const CreateProjectBody = Type.Object(
  { id: Handle, name: Type.Optional(Type.String({ minLength: 1, maxLength: LIMITS.displayName })) },
  { additionalProperties: false },
);
export const ProjectJson = Type.Object({ id: Type.String(), name: Type.String(), workspace: Type.String() });

export const WhoAmIJson = Type.Object({
  tokenId: Type.String(),
  admin: Type.Boolean(),
  agent: Type.Union([Type.String(), Type.Null()]),
  project: Type.String(),
});

export const AuditQuery = Type.Object(
  { token: Type.Optional(Id), limit: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,2}$' })) },
  { additionalProperties: false },
);
export const AuditJson = Type.Object({
  seq: Type.String(),
  tokenId: Type.String(),
  project: Type.Union([Type.String(), Type.Null()]),
  method: Type.String(),
  route: Type.String(),
  params: Type.Unknown(),
  status: Type.Integer(),
  at: Timestamp,
});
