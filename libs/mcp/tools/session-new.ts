import { z } from 'zod';
import { LIMITS } from '../../domain/limits.ts';
import { CHANGE, defineTool } from '../define-tool.ts';
import { SessionOut, Text } from '../schemas.ts';
import { actor } from '../tool-context.ts';

/** `session_new`: start a tracked session; its facts go into the context packet of each of its handoffs. */
export const sessionNewTool = defineTool({
  name: 'session_new',
  title: 'Start a tracked session',
  description: 'Start a tracked session for one task across agents. Send handoffs with its id; facts recorded in it travel with them.',
  input: z.strictObject({
    title: Text(LIMITS.title, 'what the task is'),
    summary: Text(LIMITS.contextSummary, 'where things stand').optional(),
  }),
  output: z.strictObject({ session: SessionOut }),
  annotations: CHANGE,
  headline: (r) => `session ${r.session.id} started`,
  async run({ title, summary }, ctx) {
    const { body } = await ctx.api.post<z.infer<typeof SessionOut>>('/v1/sessions', {
      ...actor(ctx),
      title,
      ...(summary !== undefined ? { summary } : {}),
    });
    return { session: body };
  },
});
