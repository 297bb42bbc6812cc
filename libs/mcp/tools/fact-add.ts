import { z } from 'zod';
import { LIMITS } from '../../domain/limits.ts';
import { CHANGE, defineTool } from '../define-tool.ts';
import { FactId, FactKind, FactOut, SessionId, Text } from '../schemas.ts';
import { actor } from '../tool-context.ts';

/** `fact_add`: record a fact in a session, authored by this agent (cite it when returning work). */
export const factAddTool = defineTool({
  name: 'fact_add',
  title: 'Record a session fact',
  description:
    'Record what you learned in a tracked session: a decision, a failed attempt, a lesson, an open ' +
    'question, a note or a result. Cite its id in return as evidence.',
  input: z.strictObject({
    session: SessionId,
    kind: FactKind,
    text: Text(LIMITS.factText, 'the fact'),
    supersedes: FactId.optional().describe('an older fact of the session this one replaces'),
  }),
  output: z.strictObject({ fact: FactOut }),
  annotations: CHANGE,
  headline: (r) => `fact ${r.fact.id} (${r.fact.kind}) recorded`,
  async run({ session, kind, text, supersedes }, ctx) {
    const { body } = await ctx.api.post<z.infer<typeof FactOut>>(`/v1/sessions/${encodeURIComponent(session)}/facts`, {
      ...actor(ctx),
      kind,
      text,
      ...(supersedes !== undefined ? { supersedes } : {}),
    });
    return { fact: body };
  },
});
