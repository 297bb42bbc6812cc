import { z } from 'zod';
import { defineTool, READ_ONLY } from '../define-tool.ts';
import { AttemptOut, EventOut, HandoffId, HandoffOut, PacketOut } from '../schemas.ts';
import { handoffPath } from '../tool-context.ts';

/**
 * `read`: one handoff as its sender or recipient sees it, with its delivery attempts, its
 * event timeline and its context packet. A handoff the agent may not see is
 * `handoff_not_found`, exactly as one that does not exist (and as over HTTP).
 */
export const readTool = defineTool({
  name: 'read',
  title: 'Read a handoff',
  description:
    'One handoff you sent or received (or unowned work of your project): its content, attempts, full event timeline and context packet.',
  input: z.strictObject({ id: HandoffId }),
  output: z.strictObject({
    handoff: HandoffOut,
    attempts: z.array(AttemptOut),
    events: z.array(EventOut),
    notifications: z.array(z.looseObject({ kind: z.string(), text: z.string() })),
    packet: PacketOut,
  }),
  annotations: READ_ONLY,
  headline: (r) =>
    `handoff ${r.handoff.id} ${r.handoff.from} -> ${r.handoff.to ?? '@project'} ${r.handoff.deliveryState}${r.handoff.workState ? `/${r.handoff.workState}` : ''}, ${r.events.length} events`,
  async run({ id }, ctx) {
    const { attempts, events, notifications, ...handoff } = await ctx.api.get<
      z.infer<typeof HandoffOut> & { attempts: never[]; events: never[]; notifications: never[] }
    >(handoffPath(id));
    const packet = await ctx.api.get<z.infer<typeof PacketOut>>(handoffPath(id, 'packet'));
    return { handoff: handoff, attempts, events, notifications, packet };
  },
});
