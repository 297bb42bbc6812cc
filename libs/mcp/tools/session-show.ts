import { z } from 'zod';
import { defineTool, READ_ONLY } from '../define-tool.ts';
import { FactOut, SessionId, SessionOut } from '../schemas.ts';
import {} from '../tool-context.ts';

/** `session_show`: a session, its facts (superseded ones marked) and the handoffs of it the agent may see. */
export const sessionShowTool = defineTool({
  name: 'session_show',
  title: 'Show a tracked session',
  description: 'A tracked session: its summary, every fact (superseded ones marked) and its handoffs that you can see.',
  input: z.strictObject({ id: SessionId }),
  output: z.strictObject({
    session: SessionOut,
    facts: z.array(FactOut),
    handoffs: z.array(
      z.looseObject({
        id: z.string(),
        title: z.string().nullable(),
        from: z.string(),
        to: z.string().nullable(),
        deliveryState: z.string(),
        workState: z.string().nullable(),
      }),
    ),
  }),
  annotations: READ_ONLY,
  headline: (r) => `session ${r.session.id}: ${r.facts.length} facts, ${r.handoffs.length} handoffs`,
  async run({ id }, ctx) {
    return ctx.api.get(`/v1/sessions/${encodeURIComponent(id)}`);
  },
});
