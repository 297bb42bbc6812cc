import type { DeliveryTarget, ProviderAdapter, SendResult, TurnObservation, TurnRequest } from './provider-adapter.ts';
import type { AdapterDeadlines } from './provider-spec.ts';
import { followAbort } from './race-abort.ts';

/** An adapter call that ran past its deadline. Observations and busy questions throw it: "could not ask". */
export class AdapterDeadlineExceeded extends Error {
  constructor(
    readonly call: 'write' | 'observe' | 'busy',
    readonly ms: number,
  ) {
    super(`the provider did not answer the ${call} within ${ms} ms`);
    this.name = 'AdapterDeadlineExceeded';
  }
}

/**
 * Runs `call` with a signal that aborts at the deadline (or when `outer` aborts). Past the
 * deadline the returned promise settles with `onDeadline()` whatever the adapter still does:
 * the engine never waits on a provider longer than it was told to.
 */
async function withDeadline<T>(
  kind: AdapterDeadlineExceeded['call'],
  ms: number,
  outer: AbortSignal,
  call: (signal: AbortSignal) => Promise<T>,
  onDeadline: () => T | Promise<T>,
): Promise<T> {
  if (ms <= 0) return call(outer);
  // One controller for the adapter, aborted at the deadline or by `outer` (followed until the
  // call is over: by then it settled, or the deadline aborted the signal already).
  // Cheaper than AbortSignal.any over a second controller on Node 20 (docs/performance-history.md,
  // "Kept templates that were not kept, signals that follow, runs that follow").
  const controller = new AbortController();
  const unfollow = followAbort(outer, controller);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'deadline'>((resolve) => {
    timer = setTimeout(() => {
      // Settle first: the adapter's reaction to the abort (a rejection) must not win the race.
      resolve('deadline');
      controller.abort(new AdapterDeadlineExceeded(kind, ms));
    }, ms);
  });
  try {
    const running = call(controller.signal);
    // An adapter that settles after its deadline must not surface as an unhandled rejection.
    running.catch(() => undefined);
    const first = await Promise.race([running, expired]);
    if (first === 'deadline') return await onDeadline();
    return first;
  } finally {
    clearTimeout(timer);
    unfollow();
  }
}

/**
 * Wraps an adapter so that every write, observation and busy question has a deadline:
 * - a write past its deadline is `lost`: it may have landed, so it becomes UNCERTAIN and is
 *   settled by observation, never resent blindly (the adapter's own signal aborts, too);
 * - an observation or a busy question past its deadline throws AdapterDeadlineExceeded, which
 *   the engine treats as "the provider could not be asked".
 * Following a turn (`waitForTurn`) has no deadline here: a turn may run for an hour, and the
 * engine's unobservable rule and each adapter's own turn deadline bound it. Nor has `prepare`:
 * it exists to take the slow first start out of the write's deadline, and runs under the
 * caller's signal only.
 */
export function withDeadlines(adapter: ProviderAdapter, deadlines: AdapterDeadlines): ProviderAdapter {
  return {
    provider: adapter.provider,
    ...(adapter.reportsBusyOnSend !== undefined ? { reportsBusyOnSend: adapter.reportsBusyOnSend } : {}),
    ...(adapter.sessionKeepsPrompts !== undefined ? { sessionKeepsPrompts: adapter.sessionKeepsPrompts } : {}),
    sendTurn(target: DeliveryTarget, turn: TurnRequest, signal: AbortSignal): Promise<SendResult> {
      return withDeadline(
        'write',
        deadlines.writeMs,
        signal,
        (s) => adapter.sendTurn(target, turn, s),
        (): SendResult => ({
          outcome: 'lost',
          error: `the write got no answer within its deadline (${deadlines.writeMs} ms); it may have landed`,
        }),
      );
    },
    observeTurn(target: DeliveryTarget, requestId: string, signal: AbortSignal): Promise<TurnObservation> {
      return withDeadline(
        'observe',
        deadlines.observeMs,
        signal,
        (s) => adapter.observeTurn(target, requestId, s),
        () => {
          throw new AdapterDeadlineExceeded('observe', deadlines.observeMs);
        },
      );
    },
    isBusy(target: DeliveryTarget, signal: AbortSignal): Promise<boolean> {
      return withDeadline(
        'busy',
        deadlines.busyMs,
        signal,
        (s) => adapter.isBusy(target, s),
        () => {
          throw new AdapterDeadlineExceeded('busy', deadlines.busyMs);
        },
      );
    },
    waitForTurn: (target, requestId, hooks, signal) => adapter.waitForTurn(target, requestId, hooks, signal),
    ...(adapter.prepare ? { prepare: adapter.prepare.bind(adapter) } : {}),
    close: () => adapter.close(),
  };
}
