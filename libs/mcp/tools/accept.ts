import { z } from 'zod';
import { defineTool, IDEMPOTENT_CHANGE } from '../define-tool.ts';
import { HandoffId, HandoffOut, LeaseSeconds, PacketOut } from '../schemas.ts';
import { actor, handoffPath } from '../tool-context.ts';

/**
 * `accept`: claim work (exactly one claimant wins). Accepting work you already hold answers
 * the same claim again (`recovered`), so a repeat is harmless.
 */
export const acceptTool = defineTool({
  name: 'accept',
  title: 'Accept (claim) work',
  description:
    'Claim work sent to you (or to @project). Returns the claim token, the attempt, the lease end and the ' +
    'context packet. Heartbeat while you work; return when done.',
  input: z.strictObject({ id: HandoffId, leaseSeconds: LeaseSeconds.optional() }),
  output: z.strictObject({
    handoff: HandoffOut,
    claim: z.looseObject({ token: z.string(), attempt: z.number().int(), leaseExpiresAt: z.string() }),
    packet: PacketOut,
    recovered: z.boolean().describe('true when you already held this claim'),
  }),
  annotations: IDEMPOTENT_CHANGE,
  headline: (r) =>
    `${r.recovered ? 'already yours' : 'claimed'}: handoff ${r.handoff.id}, attempt ${r.claim.attempt}, lease until ${r.claim.leaseExpiresAt}`,
  async run({ id, leaseSeconds }, ctx) {
    const { body } = await ctx.api.post<never>(handoffPath(id, 'accept'), {
      ...actor(ctx),
      ...(leaseSeconds !== undefined ? { leaseSeconds } : {}),
    });
    return body;
  },
});
