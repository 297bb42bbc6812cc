import { Type, type Static } from 'typebox';
import { POOL_PATTERN } from '../../../libs/domain/ids.ts';
import { LIMITS } from '../../../libs/domain/limits.ts';
import { PROVIDER_NAMES } from '../../../libs/db/records.ts';
import { Handle, HandoffJson, NullableTimestamp, Timestamp } from './common.ts';

/** The agents area (routes/agents): register, list, update, remove, and an agent's inbox. */

/** Role names; checked by the use case (libs/domain/agent-roles.ts: 400 invalid_role), not by the schema. */
const Roles = Type.Array(Type.String());

export const ProviderSchema = Type.Enum(PROVIDER_NAMES);

export const RegisterAgentBody = Type.Object(
  {
    id: Handle,
    displayName: Type.Optional(Type.String({ minLength: 1, maxLength: LIMITS.displayName })),
    provider: ProviderSchema,
    settings: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    target: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: LIMITS.deliveryTarget }), Type.Null()])),
    /** Worker pool (host affinity); "default" or absent: the unnamed pool. */
    pool: Type.Optional(Type.String({ pattern: POOL_PATTERN })),
    /** The roles it declares (`reviewer`, `oncall`); stored lower-case, sorted, without duplicates. */
    roles: Type.Optional(Roles),
    /** What the agent's A2A card says of it (lengths: LIMITS agentDescription, skill*; refused as invalid_agent_card). */
    description: Type.Optional(Type.String()),
    skills: Type.Optional(
      Type.Array(
        Type.Object({
          id: Type.String(),
          name: Type.Optional(Type.String()),
          description: Type.Optional(Type.String()),
          tags: Type.Optional(Type.Array(Type.String())),
          examples: Type.Optional(Type.Array(Type.String())),
        }),
      ),
    ),
  },
  { additionalProperties: false },
);
export type RegisterAgentBody = Static<typeof RegisterAgentBody>;

/** `PATCH /v1/agents/:id`: an absent field stays as it is. */
export const UpdateAgentBody = Type.Object(
  {
    /** Replaces the roles; `[]` clears them. */
    roles: Type.Optional(Roles),
  },
  { additionalProperties: false },
);

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
  /** The roles it declares, lower-case and sorted. */
  roles: Type.Array(Type.String()),
  generation: Type.Integer(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

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
