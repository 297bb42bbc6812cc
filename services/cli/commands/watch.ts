import type { Command } from 'commander';
import type { ApiClient } from '../../../libs/api-client/api-client.ts';
import { allOwnersOptions, positiveInt, type CliContext } from '../cli-context.ts';
import { eventLine, exitCodeFor, followEvents, OUTCOME_EXIT, OutcomeExit, type FeedEventJson } from '../follow-events.ts';
import { handoffLine, outcomeLines, type HandoffJson } from '../format.ts';
import { Progress } from '../../../libs/terminal/progress-bar.ts';

/** How a followed handoff ended: its final delivery state, or `timeout`. */
export type Outcome = { state: string } | { state: 'timeout' };

/**
 * Follows one handoff's events (from its first, so one that already settled ends at once)
 * until its delivery settles (RETURNED, ACKNOWLEDGED, FAILED, CANCELLED, UNAVAILABLE,
 * DUPLICATE) or `timeoutMs` passes. Each event goes to `onEvent` once, in order.
 */
export async function untilSettled(
  client: ApiClient,
  handoffId: string,
  opts: {
    timeoutMs?: number | undefined;
    allOwners?: boolean;
    onEvent: (e: FeedEventJson) => void;
    onReconnect?: (reason: string) => void;
  },
): Promise<Outcome> {
  const abort = new AbortController();
  let timedOut = false;
  const timer =
    opts.timeoutMs === undefined
      ? null
      : setTimeout(() => {
          timedOut = true;
          abort.abort();
        }, opts.timeoutMs);
  let final: string | null = null;
  try {
    await followEvents(client, {
      handoff: handoffId,
      signal: abort.signal,
      ...(opts.allOwners ? { allOwners: true } : {}),
      onEvent: (e) => {
        opts.onEvent(e);
        if (!e.settled) return false;
        final = e.to;
        return true;
      },
      ...(opts.onReconnect ? { onReconnect: opts.onReconnect } : {}),
    });
  } finally {
    if (timer) clearTimeout(timer);
  }
  // followEvents returns only when told to stop (settled) or aborted (the timeout).
  return final !== null && !timedOut ? { state: final } : { state: 'timeout' };
}

/**
 * Prints the outcome and ends with its exit code: the final handoff with --json; otherwise
 * `STATE: <the handoff's line>` and what came of it as `show` prints it (its delivery state and
 * detail, its work, the result's summary).
 */
export async function finishWithOutcome(
  ctx: CliContext,
  client: ApiClient,
  handoffId: string,
  outcome: Outcome,
  json: boolean,
): Promise<void> {
  const code = outcome.state === 'timeout' ? OUTCOME_EXIT.timeout : exitCodeFor(outcome.state);
  if (outcome.state === 'timeout' && !json) ctx.out(`timed out: ${handoffId} has not settled`);
  else {
    const h = await client.get<HandoffJson>(`/v1/handoffs/${encodeURIComponent(handoffId)}`);
    if (json) ctx.json(h);
    else ctx.out([`${outcome.state}: ${handoffLine(h)}`, ...outcomeLines(h)].join('\n'));
  }
  if (code !== 0) throw new OutcomeExit(code, outcome.state);
}

/** The steps of a delivery a progress bar counts (settled is the last). */
const DELIVERY_STEPS = ['WAITING', 'SENDING', 'ACCEPTED', 'RUNNING', 'SETTLED'] as const;

/** Colour only for people: a terminal, and NO_COLOR unset. */
function painter(colour: boolean): (line: string, e: FeedEventJson) => string {
  if (!colour) return (line) => line;
  return (line, e) => {
    if (!e.settled) return line;
    return `${exitCodeFor(e.to) === 0 ? '\u001b[32m' : '\u001b[31m'}${line}\u001b[0m`;
  };
}

/**
 * `baton watch [ID]`: prints transitions as they happen, reconnecting with Last-Event-ID (so
 * an API restart loses and repeats nothing). With ID: that handoff's whole timeline, ending
 * when it settles, with the exit code of `send --wait`. Without: every event the caller may
 * see from now on, until interrupted. One line per event; `--json` one JSON object per line.
 */
export function registerWatchCommand(program: Command, ctx: CliContext): void {
  allOwnersOptions(
    program
      .command('watch')
      .description('print handoff transitions as they happen (one handoff: until it settles)')
      .argument('[id]', 'follow only this handoff, from its first event, until it settles'),
  )
    .option('--timeout <s>', 'with ID: give up after this many seconds (exit 7)', positiveInt('--timeout', 86_400))
    .option('--json', "one JSON object per event (the API's `data`)")
    .action(async (id: string | undefined, opts: { allOwners?: boolean; timeout?: number; json?: boolean }, cmd: Command) => {
      const client = ctx.client(cmd);
      const allOwners = await ctx.allOwners(cmd, opts.allOwners);
      const paint = painter(ctx.colour());
      const print = (e: FeedEventJson) => ctx.out(opts.json ? JSON.stringify(e) : paint(eventLine(e), e));
      const onReconnect = (reason: string) => ctx.note(`reconnecting (${reason})`);
      if (id !== undefined) {
        // On a terminal, one handoff's delivery is a progress bar (label: the latest event),
        // and the events are printed as lines once it settles; piped, one line per event.
        const bar =
          !opts.json && process.stdout.isTTY ? new Progress(DELIVERY_STEPS.length, true, true, () => undefined, process.stdout) : null;
        const seen: FeedEventJson[] = [];
        const outcome = await untilSettled(client, id, {
          timeoutMs: opts.timeout === undefined ? undefined : opts.timeout * 1000,
          ...(allOwners ? { allOwners: true } : {}),
          onEvent: (e) => {
            if (!bar) return print(e);
            seen.push(e);
            bar.set(
              e.settled ? DELIVERY_STEPS.length : Math.max(1, (DELIVERY_STEPS as readonly string[]).indexOf(e.to) + 1),
              eventLine(e).trim(),
            );
          },
          onReconnect,
        });
        if (bar) {
          bar.end();
          for (const e of seen) print(e);
        }
        const code = outcome.state === 'timeout' ? OUTCOME_EXIT.timeout : exitCodeFor(outcome.state);
        if (code !== 0) throw new OutcomeExit(code, outcome.state);
        return;
      }
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once('SIGINT', onSignal);
      try {
        await followEvents(client, { signal: stop.signal, onEvent: print, onReconnect, ...(allOwners ? { allOwners: true } : {}) });
      } finally {
        process.off('SIGINT', onSignal);
      }
    });
}
