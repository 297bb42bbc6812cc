import { z } from 'zod';
import { defineTool, READ_ONLY } from '../define-tool.ts';
import { HandoffOut } from '../schemas.ts';
import {} from '../tool-context.ts';

/** `inbox`: this agent's handoffs in progress and its notifications (deadline reminders). */
export const inboxTool = defineTool({
  name: 'inbox',
  title: 'My inbox',
  description: 'Your handoffs in progress (work to accept or finish, messages to acknowledge) and your notifications.',
  input: z.strictObject({}),
  output: z.strictObject({
    agent: z.string(),
    handoffs: z.array(HandoffOut),
    notifications: z.array(
      z.looseObject({ id: z.string(), handoffId: z.string(), kind: z.string(), text: z.string(), createdAt: z.string() }),
    ),
  }),
  annotations: READ_ONLY,
  headline: (r) => `inbox of ${r.agent}: ${r.handoffs.length} in progress, ${r.notifications.length} notifications`,
  async run(_args, ctx) {
    return ctx.api.get(`/v1/agents/${encodeURIComponent(ctx.identity.agent)}/inbox`);
  },
});
