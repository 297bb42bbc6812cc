import { z } from 'zod';
import { CHANGE, defineTool } from '../define-tool.ts';
import { HandoffId, HandoffOut } from '../schemas.ts';
import { actor, handoffPath } from '../tool-context.ts';

/** `acknowledge`: the recipient marks a plain message read (work is returned instead: `not_a_message`). */
export const acknowledgeTool = defineTool({
  name: 'acknowledge',
  title: 'Acknowledge a message',
  description: 'Mark a plain message (a handoff without a title) sent to you as read. Work is returned, not acknowledged.',
  input: z.strictObject({ id: HandoffId }),
  output: z.strictObject({ handoff: HandoffOut }),
  annotations: CHANGE,
  headline: (r) => `acknowledged: handoff ${r.handoff.id} ${r.handoff.deliveryState}`,
  async run({ id }, ctx) {
    const { body } = await ctx.api.post<z.infer<typeof HandoffOut>>(handoffPath(id, 'acknowledge'), actor(ctx));
    return { handoff: body };
  },
});
