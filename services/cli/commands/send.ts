import type { Command } from 'commander';
import { collect, positiveInt, UsageError, type CliContext } from '../cli-context.ts';
import { handoffLine, type HandoffJson } from '../format.ts';
import { LIMITS } from '../../../libs/domain/limits.ts';

/**
 * `baton send [FROM] TO MESSAGE`: FROM defaults to --as, BATON_AGENT, or the token's agent
 * (an agent token may only name itself).
 */
export function registerSendCommand(program: Command, ctx: CliContext): void {
  program
    .command('send')
    .description('hand work or a message from one agent to another')
    .argument('<from-or-to>', 'sending agent (optional: the token says who you are), then the receiving agent or @project')
    .argument('<to-or-message>', 'the receiving agent (or @project, for work any agent of the project may claim), or the message')
    .option('--as <agent>', 'sending agent (default BATON_AGENT, else the token\'s agent)')
    .option('--session <id>', 'the tracked session this handoff belongs to (its facts go in the context packet)')
    .argument('[message]', 'what to do (or say)')
    .option('--title <title>', 'a title makes it work that the recipient returns')
    .option('--focus <focus>', 'what to focus on')
    .option('--done-when <criteria>', 'when the work counts as done')
    .option('--summary <summary>', 'context: where things stand')
    .option('--question <text>', 'context: an open question (repeatable)', collect)
    .option('--next <text>', 'context: a next step (repeatable)', collect)
    .option('--due-minutes <n>', 'due in this many minutes', positiveInt('--due-minutes', LIMITS.dueMinutesMax))
    .option('--key <idempotencyKey>', 'idempotency key: sending again with it returns the first handoff')
    .option('--json', 'print JSON')
    .action(async (first: string, second: string, third: string | undefined, opts: {
      as?: string; title?: string; focus?: string; doneWhen?: string; summary?: string; question?: string[]; next?: string[]; session?: string;
      dueMinutes?: number; key?: string; json?: boolean;
    }, cmd: Command) => {
      const context = opts.summary || opts.question || opts.next
        ? { ...(opts.summary ? { summary: opts.summary } : {}), ...(opts.question ? { openQuestions: opts.question } : {}), ...(opts.next ? { nextSteps: opts.next } : {}) }
        : undefined;
      const [named, to, message] = third === undefined ? [opts.as, first, second] : [first, second, third];
      if (third !== undefined && opts.as !== undefined && opts.as.toLowerCase() !== first.toLowerCase()) {
        throw new UsageError(`--as ${opts.as} and FROM ${first} disagree; give one`);
      }
      const from = ctx.as(named);
      const { status, body } = await ctx.client(cmd).post<HandoffJson>('/v1/handoffs', {
        ...(from !== undefined ? { from } : {}),
        to,
        message,
        ...(opts.title ? { title: opts.title } : {}),
        ...(opts.session ? { session: opts.session } : {}),
        ...(opts.focus ? { focus: opts.focus } : {}),
        ...(opts.doneWhen ? { doneWhen: opts.doneWhen } : {}),
        ...(context ? { context } : {}),
        ...(opts.dueMinutes ? { dueMinutes: opts.dueMinutes } : {}),
        ...(opts.key ? { idempotencyKey: opts.key } : {}),
      });
      if (opts.json) return ctx.json(body);
      ctx.out(`${status === 201 ? 'sent' : 'already sent (same key)'}: ${handoffLine(body)}`);
    });
}
