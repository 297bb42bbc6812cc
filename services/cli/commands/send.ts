import type { Command } from 'commander';
import { randomUUID } from 'node:crypto';
import { ApiError, SEND_RETRY } from '../../../libs/api-client/api-client.ts';
import { collect, longText, positiveInt, UsageError, type CliContext } from '../cli-context.ts';
import { handoffLine, type HandoffJson } from '../format.ts';
import { eventLine } from '../follow-events.ts';
import { finishWithOutcome, untilSettled } from './watch.ts';
import { LIMITS } from '../../../libs/domain/limits.ts';

/**
 * `baton send [FROM] TO [MESSAGE]`: FROM defaults to --as, BATON_AGENT, or the token's agent
 * (an agent token may only name itself). The message is the last argument, `-` for stdin,
 * `--file PATH`, or what is piped in. Every send carries an idempotency key (a fresh one per
 * invocation unless --idempotency-key names one), so a send that met 503
 * database_unavailable or a lost answer is repeated with the same key, and kept at most once.
 */
export function registerSendCommand(program: Command, ctx: CliContext): void {
  program
    .command('send')
    .description('hand work or a message from one agent to another')
    .argument('<from-or-to>', 'sending agent (optional: the token says who you are), then the receiving agent, @project or @role:<name>')
    .argument(
      '[to-or-message]',
      'the receiving agent (or @project: work any agent of the project may claim; or @role:<name>: one agent of that role), or the message',
    )
    .option('--as <agent>', "sending agent (default BATON_AGENT, else the token's agent)")
    .option('--session <id>', 'the tracked session this handoff belongs to (its facts go in the context packet)')
    .argument('[message]', 'what to do (or say); "-" reads it from stdin, as does leaving it out while something is piped in')
    .option('--file <path>', 'read the message from a file (then give only [FROM] TO)')
    .option('--title <title>', 'a title makes it work that the recipient returns')
    .option('--focus <focus>', 'what to focus on')
    .option('--done-when <criteria>', 'when the work counts as done')
    .option('--summary <summary>', 'context: where things stand')
    .option('--question <text>', 'context: an open question (repeatable)', collect)
    .option('--next <text>', 'context: a next step (repeatable)', collect)
    .option('--due-minutes <n>', 'due in this many minutes', positiveInt('--due-minutes', LIMITS.dueMinutesMax))
    .option(
      '--idempotency-key <key>',
      'sending again with the same key returns the first handoff (default: a new random key per invocation)',
    )
    .option('--key <key>', 'same as --idempotency-key')
    .option(
      '--wait',
      'then wait for the outcome on the event stream; the exit code tells the final state (0 RETURNED or ' +
        'ACKNOWLEDGED, 3 FAILED, 4 CANCELLED, 5 UNAVAILABLE, 6 DUPLICATE, 7 timeout)',
    )
    .option('--timeout <s>', 'with --wait: give up after this many seconds (exit 7; the handoff goes on)', positiveInt('--timeout', 86_400))
    .option('--json', 'print JSON (with --wait: the final handoff)')
    .action(
      async (
        first: string,
        second: string | undefined,
        third: string | undefined,
        opts: {
          as?: string;
          file?: string;
          title?: string;
          focus?: string;
          doneWhen?: string;
          summary?: string;
          question?: string[];
          next?: string[];
          session?: string;
          dueMinutes?: number;
          idempotencyKey?: string;
          key?: string;
          json?: boolean;
          wait?: boolean;
          timeout?: number;
        },
        cmd: Command,
      ) => {
        if (opts.timeout !== undefined && !opts.wait) throw new UsageError('--timeout goes with --wait');
        const context =
          opts.summary || opts.question || opts.next
            ? {
                ...(opts.summary ? { summary: opts.summary } : {}),
                ...(opts.question ? { openQuestions: opts.question } : {}),
                ...(opts.next ? { nextSteps: opts.next } : {}),
              }
            : undefined;
        // Three arguments: FROM TO MESSAGE. Two: TO MESSAGE, or FROM TO with --file. One: TO.
        const hasFrom = third !== undefined || (second !== undefined && opts.file !== undefined);
        const [named, to, given] = hasFrom ? [first, second!, third] : [opts.as, first, second];
        if (hasFrom && opts.as !== undefined && opts.as.toLowerCase() !== first.toLowerCase()) {
          throw new UsageError(`--as ${opts.as} and FROM ${first} disagree; give one`);
        }
        if (opts.idempotencyKey !== undefined && opts.key !== undefined && opts.idempotencyKey !== opts.key) {
          throw new UsageError('--idempotency-key and --key disagree; give one');
        }
        const message = (await longText(ctx, 'the message', { value: given, file: opts.file, required: true }))!;
        const idempotencyKey = opts.idempotencyKey ?? opts.key ?? `cli-${randomUUID()}`;
        const from = ctx.as(named);
        let retried = false;
        const { status, body } = await ctx.client(cmd).postIdempotent<HandoffJson>(
          '/v1/handoffs',
          {
            ...(from !== undefined ? { from } : {}),
            to,
            message,
            ...(opts.title ? { title: opts.title } : {}),
            ...(opts.session ? { session: opts.session } : {}),
            ...(opts.focus ? { focus: opts.focus } : {}),
            ...(opts.doneWhen ? { doneWhen: opts.doneWhen } : {}),
            ...(context ? { context } : {}),
            ...(opts.dueMinutes ? { dueMinutes: opts.dueMinutes } : {}),
            idempotencyKey,
          },
          SEND_RETRY,
          (err, waitMs) => {
            retried = true;
            ctx.note(
              `send not confirmed (${err instanceof ApiError ? `${err.status} ${err.code}` : err.message}); retrying in ${waitMs} ms with the same idempotency key ${idempotencyKey}`,
            );
          },
        );
        if (opts.wait) {
          // Progress goes to stderr, so stdout holds only the outcome (or the final handoff as JSON).
          ctx.note(`${status === 201 || retried ? 'sent' : 'already sent (same key)'}: ${handoffLine(body)}`);
          const client = ctx.client(cmd);
          const outcome = await untilSettled(client, body.id, {
            timeoutMs: opts.timeout === undefined ? undefined : opts.timeout * 1000,
            onEvent: (e) => {
              if (!opts.json) ctx.note(eventLine(e));
            },
            onReconnect: (reason) => ctx.note(`reconnecting (${reason})`),
          });
          return finishWithOutcome(ctx, client, body.id, outcome, opts.json === true);
        }
        if (opts.json) return ctx.json(body);
        // A 200 after our own retry is our first try's handoff, which did land.
        ctx.out(`${status === 201 || retried ? 'sent' : 'already sent (same key)'}: ${handoffLine(body)}`);
      },
    );
}
