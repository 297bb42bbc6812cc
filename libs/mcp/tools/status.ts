import { z } from 'zod';
import { defineTool, READ_ONLY } from '../define-tool.ts';
import { AttemptOut, HandoffId, HandoffOut } from '../schemas.ts';
import { handoffPath } from '../tool-context.ts';

const Counts = z.looseObject({ project: z.string(), total: z.number().int(), byState: z.record(z.string(), z.number().int()) });
const Delivery = z.looseObject({
  id: z.string(),
  deliveryState: z.string(),
  workState: z.string().nullable(),
  detail: z.string().nullable(),
  attemptCount: z.number().int(),
  attempts: z.array(AttemptOut),
  lastEvent: z.looseObject({ event: z.string(), to: z.string(), at: z.string() }).nullable(),
});

/** `status`: counts by delivery state of what the agent may see, or one handoff's delivery. */
export const statusTool = defineTool({
  name: 'status',
  title: 'Delivery status',
  description:
    "Without an id: how many handoffs you can see are in each delivery state. With an id: where that handoff's delivery stands (state, attempts, last event).",
  input: z.strictObject({ id: HandoffId.optional().describe('a handoff id; leave out for counts') }),
  output: z.strictObject({ counts: Counts.optional(), delivery: Delivery.optional() }),
  annotations: READ_ONLY,
  headline: (r) =>
    r.delivery
      ? `handoff ${r.delivery.id}: ${r.delivery.deliveryState}${r.delivery.workState ? `/${r.delivery.workState}` : ''}, ${r.delivery.attemptCount} attempts`
      : `project ${r.counts?.project}: ${r.counts?.total} handoffs`,
  async run({ id }, ctx) {
    if (id === undefined) return { counts: await ctx.api.get<z.infer<typeof Counts>>('/v1/status') };
    const h = await ctx.api.get<
      z.infer<typeof HandoffOut> & { attempts: z.infer<typeof AttemptOut>[]; events: Array<{ event: string; to: string; at: string }> }
    >(handoffPath(id));
    const last = h.events[h.events.length - 1];
    return {
      delivery: {
        id: h.id,
        deliveryState: h.deliveryState,
        workState: h.workState,
        detail: h.detail,
        attemptCount: h.attemptCount,
        attempts: h.attempts,
        lastEvent: last ? { event: last.event, to: last.to, at: last.at } : null,
      },
    };
  },
});
