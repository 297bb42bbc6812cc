import { z } from 'zod';
import { LIMITS } from '../../domain/limits.ts';
import { CHANGE, defineTool } from '../define-tool.ts';
import { HandoffId, HandoffOut, Text } from '../schemas.ts';
import { actor, handoffPath } from '../tool-context.ts';

/** `close`: the sender settles returned work: accepted, revision (back with a note), or blocked. */
export const closeTool = defineTool({
  name: 'close',
  title: 'Close returned work',
  description: 'As the sender of returned work: accept it, send it back for a revision (with a note), or mark it blocked (with a note).',
  input: z.strictObject({
    id: HandoffId,
    resolution: z.enum(['accepted', 'revision', 'blocked']),
    note: Text(LIMITS.focus, 'what to change (revision) or why (blocked)').optional(),
  }),
  output: z.strictObject({ handoff: HandoffOut }),
  annotations: CHANGE,
  headline: (r) => `closed: handoff ${r.handoff.id} ${r.handoff.workState ?? ''} ${r.handoff.work?.resolution ?? ''}`.trimEnd(),
  async run({ id, resolution, note }, ctx) {
    const { body } = await ctx.api.post<z.infer<typeof HandoffOut>>(handoffPath(id, 'close'), {
      ...actor(ctx),
      resolution,
      ...(note !== undefined ? { note } : {}),
    });
    return { handoff: body };
  },
});
