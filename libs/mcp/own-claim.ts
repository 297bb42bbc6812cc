import { ApiError } from '../api-client/api-client.ts';
import type { HandoffJson } from './schemas.ts';
import { actor, handoffPath, type ToolContext } from './tool-context.ts';

/**
 * The claim this session's agent holds on handoff `id`, for `heartbeat` and `return` without a
 * claim token (as `baton heartbeat` finds it): read the handoff and, only if the agent holds
 * its claim, accept again, which answers a live claim with its token and changes nothing.
 * @throws ApiError claim_lost when the agent holds no claim (nothing is claimed on the way)
 */
export async function ownClaim(ctx: ToolContext, id: string): Promise<{ token: string; revision: number | undefined }> {
  const me = ctx.identity.agent;
  const h = await ctx.api.get<HandoffJson>(handoffPath(id));
  if (h.work?.state !== 'claimed' || h.work.claimedBy?.toLowerCase() !== me) {
    const now = h.work
      ? `its work is ${h.work.state}${h.work.claimedBy ? `, claimed by ${h.work.claimedBy}` : ''}`
      : 'it is a plain message';
    throw new ApiError('claim_lost', `${me} holds no claim on handoff ${h.id} (${now}): accept it first, or give claimToken`, 409);
  }
  const again = await ctx.api.post<{ claim: { token: string }; handoff: HandoffJson }>(handoffPath(id, 'accept'), actor(ctx));
  return { token: again.body.claim.token, revision: again.body.handoff.work?.revision };
}
