import { z } from 'zod';
import { LIMITS } from '../../domain/limits.ts';
import { defineTool, IDEMPOTENT_CHANGE } from '../define-tool.ts';
import { ownClaim } from '../own-claim.ts';
import { FactId, HandoffId, HandoffOut, Text } from '../schemas.ts';
import { actor, handoffPath } from '../tool-context.ts';

/**
 * `return`: give claimed work back to its sender with the result, citing session facts as
 * evidence (`invalid_evidence` if a fact is not of the handoff's session, its project, or this
 * agent). `outcome: failed` puts the work back to open for a new claim.
 */
export const returnTool = defineTool({
  name: 'return',
  title: 'Return work',
  description:
    'Return work you hold with what was done, citing facts you recorded (fact_add) as evidence. outcome "failed" gives it back for someone else to claim.',
  input: z.strictObject({
    id: HandoffId,
    summary: Text(LIMITS.contextSummary, 'what was done (or why it failed)'),
    outcome: z.enum(['succeeded', 'failed']).optional().describe('default succeeded'),
    facts: z.array(FactId).max(LIMITS.listItems).optional().describe('ids of session facts you wrote that prove it'),
    claimToken: z.string().min(1).max(200).optional().describe('the token accept gave (default: the claim you hold)'),
  }),
  output: z.strictObject({ handoff: HandoffOut, recovered: z.boolean().describe('true when it was already returned with this result') }),
  annotations: IDEMPOTENT_CHANGE,
  headline: (r) =>
    `${r.recovered ? 'already returned' : 'returned'}: handoff ${r.handoff.id} ${r.handoff.work?.returnOutcome ?? ''}`.trimEnd(),
  async run({ id, summary, outcome, facts, claimToken }, ctx) {
    const claim = claimToken !== undefined ? { token: claimToken, revision: undefined } : await ownClaim(ctx, id);
    const { body } = await ctx.api.post<never>(handoffPath(id, 'return'), {
      ...actor(ctx),
      claimToken: claim.token,
      summary,
      outcome: outcome ?? 'succeeded',
      ...(claim.revision !== undefined ? { revision: claim.revision } : {}),
      ...(facts !== undefined ? { facts } : {}),
    });
    return body;
  },
});
