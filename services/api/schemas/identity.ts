import { Type } from 'typebox';
import { LIMITS } from '../../../libs/domain/limits.ts';
import { Handle, Id, NullableTimestamp, Timestamp } from './common.ts';

/** The identity area (routes/identity): tokens, projects, who am I, the audit log. */

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
