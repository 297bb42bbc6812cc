import { z } from 'zod';
import { defineTool } from '../define-tool.ts';
import { HandoffId, HandoffOut } from '../schemas.ts';
import { actor, handoffPath } from '../tool-context.ts';

/** `cancel`: the sender withdraws a handoff (a turn already written is not undone). */
export const cancelTool = defineTool({
  name: 'cancel',
  title: 'Cancel a handoff you sent',
  description: "Withdraw a handoff you sent. A turn already written into the recipient's session is not undone.",
  input: z.strictObject({ id: HandoffId }),
  output: z.strictObject({ handoff: HandoffOut }),
  annotations: { readOnlyHint: false, idempotentHint: false, destructiveHint: true, openWorldHint: false },
  headline: (r) => `cancelled: handoff ${r.handoff.id} ${r.handoff.deliveryState}`,
  async run({ id }, ctx) {
    const { body } = await ctx.api.post<z.infer<typeof HandoffOut>>(handoffPath(id, 'cancel'), actor(ctx));
    return { handoff: body };
  },
});
