import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { SEND_RETRY } from '../../api-client/api-client.ts';
import { LIMITS } from '../../domain/limits.ts';
import { CHANGE, defineTool } from '../define-tool.ts';
import { Handle, HandoffOut, SessionId, Text } from '../schemas.ts';
import { actor, type ToolContext } from '../tool-context.ts';

/**
 * `send`: a handoff from this session's agent to another agent, to `@project` (work any
 * agent of the project may claim), or to `@role:<name>` (one agent of that role, chosen when it
 * is dispatched). Every call carries an idempotency key, `mcp-<uuid>` unless
 * given, and is repeated with the same key after a 503 database_unavailable or a lost answer,
 * as `baton send` does, so it is stored at most once. A title makes it work to be returned.
 */
export const sendTool = defineTool({
  name: 'send',
  title: 'Send a handoff',
  description:
    'Hand work or a message to another agent (or to "@project": work any agent of the project may claim; ' +
    'or to "@role:<name>": one agent declaring that role, the idle one first, chosen when it is dispatched). ' +
    'With a title it is work: the recipient accepts it, returns it with a result, and you close it. You are always the sender.',
  input: z.strictObject({
    to: z
      .union([
        Handle,
        z.literal('@project'),
        z
          .string()
          .regex(/^@role:[A-Za-z0-9][A-Za-z0-9_-]*$/)
          .max(LIMITS.role + 6),
      ])
      .describe('the receiving agent id, "@project", or "@role:<name>"'),
    message: Text(LIMITS.message, 'what to do (or say)'),
    title: Text(LIMITS.title, 'a title makes it work that the recipient returns').optional(),
    focus: Text(LIMITS.focus, 'what to focus on').optional(),
    doneWhen: Text(LIMITS.doneWhen, 'when the work counts as done').optional(),
    context: z
      .strictObject({
        summary: Text(LIMITS.contextSummary, 'where things stand').optional(),
        openQuestions: z.array(Text(LIMITS.listItem, 'an open question')).max(LIMITS.listItems).optional(),
        nextSteps: z.array(Text(LIMITS.listItem, 'a next step')).max(LIMITS.listItems).optional(),
      })
      .optional()
      .describe('context for the recipient: summary, open questions, next steps'),
    session: SessionId.optional().describe('the tracked session this belongs to (its facts go into the context packet)'),
    dueMinutes: z.number().int().min(1).max(LIMITS.dueMinutesMax).optional().describe('due in this many minutes'),
    dueAt: z.iso.datetime({ offset: true }).optional().describe('due at this ISO 8601 time (give dueMinutes or dueAt, not both)'),
    idempotencyKey: Text(
      LIMITS.idempotencyKey,
      'sending again with the same key returns the first handoff (default: a new key per call)',
    ).optional(),
  }),
  output: z.strictObject({
    handoff: HandoffOut,
    created: z.boolean().describe('false when the key had already been used for this handoff (nothing new was sent)'),
    idempotencyKey: z.string(),
  }),
  annotations: { ...CHANGE, idempotentHint: false },
  headline: (r) =>
    `${r.created ? 'sent' : 'already sent (same idempotency key)'}: handoff ${r.handoff.id} ${r.handoff.from} -> ${r.handoff.to ?? (r.handoff.toRole ? `@role:${r.handoff.toRole}` : '@project')} ${r.handoff.deliveryState}${r.handoff.workState ? `/${r.handoff.workState}` : ''}`,
  async run(args, ctx: ToolContext) {
    const idempotencyKey = args.idempotencyKey ?? `mcp-${randomUUID()}`;
    let retried = false;
    const { status, body } = await ctx.api.postIdempotent<z.infer<typeof HandoffOut>>(
      '/v1/handoffs',
      {
        ...actor(ctx, 'from'),
        to: args.to,
        message: args.message,
        ...(args.title !== undefined ? { title: args.title } : {}),
        ...(args.focus !== undefined ? { focus: args.focus } : {}),
        ...(args.doneWhen !== undefined ? { doneWhen: args.doneWhen } : {}),
        ...(args.context !== undefined ? { context: args.context } : {}),
        ...(args.session !== undefined ? { session: args.session } : {}),
        ...(args.dueMinutes !== undefined ? { dueMinutes: args.dueMinutes } : {}),
        ...(args.dueAt !== undefined ? { dueAt: args.dueAt } : {}),
        idempotencyKey,
      },
      SEND_RETRY,
      () => void (retried = true),
    );
    // A 200 after our own retry is our first try's handoff, which did land.
    return { handoff: body, created: status === 201 || retried, idempotencyKey };
  },
});
