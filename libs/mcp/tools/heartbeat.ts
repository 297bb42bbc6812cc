import { z } from 'zod';
import { defineTool, IDEMPOTENT_CHANGE } from '../define-tool.ts';
import { ownClaim } from '../own-claim.ts';
import { HandoffId, LeaseSeconds } from '../schemas.ts';
import { actor, handoffPath } from '../tool-context.ts';

/** `heartbeat`: renew the lease of a claim this agent holds. */
export const heartbeatTool = defineTool({
  name: 'heartbeat',
  title: 'Renew a claim',
  description:
    'Renew the lease of work you hold, so it is not given to someone else while you work. Without claimToken, the claim you hold is found.',
  input: z.strictObject({
    id: HandoffId,
    claimToken: z.string().min(1).max(200).optional().describe('the token accept gave (default: the claim you hold)'),
    leaseSeconds: LeaseSeconds.optional(),
  }),
  output: z.strictObject({ id: z.string(), leaseExpiresAt: z.string() }),
  annotations: IDEMPOTENT_CHANGE,
  headline: (r) => `handoff ${r.id}: lease until ${r.leaseExpiresAt}`,
  async run({ id, claimToken, leaseSeconds }, ctx) {
    const token = claimToken ?? (await ownClaim(ctx, id)).token;
    const { body } = await ctx.api.post<{ leaseExpiresAt: string }>(handoffPath(id, 'heartbeat'), {
      ...actor(ctx),
      claimToken: token,
      ...(leaseSeconds !== undefined ? { leaseSeconds } : {}),
    });
    return { id, leaseExpiresAt: body.leaseExpiresAt };
  },
});
