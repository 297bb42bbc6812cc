import { z } from 'zod';
import { DELIVERY_STATES } from '../../domain/delivery-states.ts';
import { CHANGE, defineTool, READ_ONLY } from '../define-tool.ts';
import { Handle, HandoffId } from '../schemas.ts';

/**
 * Signed event subscriptions over MCP, for the session's own agent: the same /v1/subscriptions
 * routes, so an agent sees and removes only its own, and events of handoffs it may see.
 */
const SubscriptionOut = z.looseObject({
  id: z.string(),
  url: z.string(),
  owner: z.string().nullable(),
  filter: z.looseObject({}),
  status: z.string(),
  pausedReason: z.string().nullable(),
  position: z.string(),
  deadLetters: z.number().int(),
});
const SubscriptionId = z.uuid().describe('subscription id (a UUID)');
const subscriptionPath = (id: string) => `/v1/subscriptions/${encodeURIComponent(id)}`;

/** `subscribe`: Baton POSTs matching handoff events to a URL, signed with a secret shown once. */
export const subscribeTool = defineTool({
  name: 'subscribe',
  title: 'Subscribe to handoff events',
  description:
    'Have Baton POST every matching event of your handoffs to a URL, at least once and in order per handoff, signed ' +
    '(HMAC-SHA256 over the timestamp and the raw body). The signing secret is in this answer only: keep it.',
  input: z.strictObject({
    url: z.string().min(1).max(2000).describe('where Baton POSTs the events (https, or a private address only if allowed)'),
    handoffId: HandoffId.optional().describe('only this handoff'),
    agents: z.array(Handle).min(1).max(50).optional().describe('only handoffs sent to or by these agents'),
    states: z.array(z.enum(DELIVERY_STATES)).min(1).max(20).optional().describe('only events reaching these delivery states'),
    events: z
      .array(
        z
          .string()
          .regex(/^[a-z_]+$/)
          .max(40),
      )
      .min(1)
      .max(50)
      .optional()
      .describe('only these event kinds'),
  }),
  output: z.strictObject({ subscription: SubscriptionOut, secret: z.string() }),
  // It makes Baton call a URL outside this session.
  annotations: { ...CHANGE, openWorldHint: true },
  headline: (r) => `subscribed: ${r.subscription.id} → ${r.subscription.url} (the secret is shown only now)`,
  async run({ url, ...filter }, ctx) {
    const { body } = await ctx.api.post<{ subscription: z.infer<typeof SubscriptionOut>; secret: string }>('/v1/subscriptions', {
      url,
      filter,
    });
    return body;
  },
});

/** `list_subscriptions`: the session agent's subscriptions, never their secrets. */
export const listSubscriptionsTool = defineTool({
  name: 'list_subscriptions',
  title: 'List your subscriptions',
  description: 'Your event subscriptions: URL, filter, status (active or paused, and why) and dead letters. Secrets are never shown.',
  input: z.strictObject({}),
  output: z.strictObject({ subscriptions: z.array(SubscriptionOut) }),
  annotations: READ_ONLY,
  headline: (r) => `${r.subscriptions.length} subscriptions`,
  async run(_args, ctx) {
    const { items } = await ctx.api.get<{ items: Array<z.infer<typeof SubscriptionOut>> }>('/v1/subscriptions');
    return { subscriptions: items };
  },
});

/** `unsubscribe`: removes one of the session agent's subscriptions; nothing more is sent to it. */
export const unsubscribeTool = defineTool({
  name: 'unsubscribe',
  title: 'Remove a subscription',
  description: 'Remove one of your event subscriptions: Baton sends it nothing more.',
  input: z.strictObject({ id: SubscriptionId }),
  output: z.strictObject({ removed: z.string() }),
  annotations: { readOnlyHint: false, idempotentHint: false, destructiveHint: true, openWorldHint: false },
  headline: (r) => `removed subscription ${r.removed}`,
  async run({ id }, ctx) {
    await ctx.api.request('DELETE', subscriptionPath(id));
    return { removed: id };
  },
});
