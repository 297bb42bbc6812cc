import { Type } from 'typebox';
import { LIMITS } from '../../../libs/domain/limits.ts';
import { AllOwners, FactId, Handle, HandoffJson, Timestamp } from './common.ts';

/** The work area (routes/work): accept, heartbeat, return, close; the packet, outbox and board. */

const LeaseSeconds = Type.Integer({ minimum: 1, maximum: LIMITS.leaseSecondsMax });

export const AcceptBody = Type.Object(
  { as: Type.Optional(Handle), leaseSeconds: Type.Optional(LeaseSeconds) },
  { additionalProperties: false },
);
export const HeartbeatBody = Type.Object(
  { as: Type.Optional(Handle), claimToken: Type.String({ minLength: 1, maxLength: 100 }), leaseSeconds: Type.Optional(LeaseSeconds) },
  { additionalProperties: false },
);
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

export const PacketJson = Type.Object({
  text: Type.String(),
  factIds: Type.Array(Type.String()),
  omittedFacts: Type.Integer(),
  truncated: Type.Boolean(),
});

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
