import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { ProviderAdapter } from '../../libs/adapters/provider-adapter.ts';
import { AdapterDeadlineExceeded, withDeadlines } from '../../libs/adapters/with-deadlines.ts';

/** An adapter whose every call waits until its signal aborts (a provider that never answers). */
function silent(seen: { signals: AbortSignal[] }): ProviderAdapter {
  const wait = <T>(signal: AbortSignal) =>
    new Promise<T>((_, reject) => {
      seen.signals.push(signal);
      if (signal.aborted) reject(signal.reason);
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  return {
    provider: 'silent',
    sendTurn: (_t, _turn, signal) => wait(signal),
    observeTurn: (_t, _id, signal) => wait(signal),
    isBusy: (_t, signal) => wait(signal),
    waitForTurn: (_t, _id, _hooks, signal) => wait(signal),
    close: async () => undefined,
  };
}

const target = { agentId: 'a', handle: 'a', target: null, settings: {} };
const turn = {
  requestId: 'r',
  handoffId: 'h',
  attempt: 1,
  from: 'x',
  title: null,
  message: 'm',
  focus: null,
  doneWhen: null,
  context: { summary: null, openQuestions: [], nextSteps: [] },
  packet: '',
};
const never = new AbortController().signal;

describe('adapter call deadlines', () => {
  it('a write past its deadline is lost (it may have landed), and the adapter is told to give up', async () => {
    const seen = { signals: [] as AbortSignal[] };
    const adapter = withDeadlines(silent(seen), { writeMs: 50, observeMs: 50, busyMs: 50 });
    const started = Date.now();
    const result = await adapter.sendTurn(target, turn, never);
    expect(result.outcome).toBe('lost');
    expect(result.outcome === 'lost' && result.error).toMatch(/deadline/);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(seen.signals[0]?.aborted).toBe(true);
  });

  it('an observation or a busy question past its deadline throws "could not ask"', async () => {
    const adapter = withDeadlines(silent({ signals: [] }), { writeMs: 50, observeMs: 40, busyMs: 30 });
    await expect(adapter.observeTurn(target, 'r', never)).rejects.toBeInstanceOf(AdapterDeadlineExceeded);
    await expect(adapter.isBusy(target, never)).rejects.toMatchObject({ call: 'busy', ms: 30 });
  });

  it("passes the caller's abort on with its reason, at once when it came before, and adds no listener per call to the caller's signal", async () => {
    const seen = { signals: [] as AbortSignal[] };
    const adapter = withDeadlines(silent(seen), { writeMs: 5_000, observeMs: 5_000, busyMs: 5_000 });
    const outer = new AbortController();
    const asking = adapter.isBusy(target, outer.signal);
    outer.abort(new Error('lock lost'));
    await expect(asking).rejects.toThrow('lock lost');
    expect(seen.signals[0]?.reason).toEqual(new Error('lock lost'));
    await expect(adapter.observeTurn(target, 'r', outer.signal)).rejects.toThrow('lock lost');

    // A long-lived signal (a run's turn lock) gathers no listeners from calls that ended: the
    // one that all calls following it share (race-abort.ts followAbort), however many there were.
    const lock = new AbortController();
    const answering = withDeadlines({ ...silent(seen), isBusy: async () => false }, { writeMs: 5_000, observeMs: 5_000, busyMs: 5_000 });
    for (let i = 0; i < 20; i++) expect(await answering.isBusy(target, lock.signal)).toBe(false);
    expect(getEventListeners(lock.signal, 'abort')).toHaveLength(1);
  });

  it('many calls at once on one signal (a write is never aborted) leave it one listener and warn of no leak', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const shared = new AbortController().signal;
      let listening = 0;
      const slow = withDeadlines(
        {
          ...silent({ signals: [] }),
          isBusy: async () => {
            listening = Math.max(listening, getEventListeners(shared, 'abort').length);
            await new Promise((r) => setTimeout(r, 20));
            return false;
          },
        },
        { writeMs: 5_000, observeMs: 5_000, busyMs: 5_000 },
      );
      expect(await Promise.all(Array.from({ length: 30 }, () => slow.isBusy(target, shared)))).toEqual(Array(30).fill(false));
      expect(listening).toBe(1);
      // Let a warning emitted on this tick reach the listener.
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('follows a turn without a deadline of its own (a turn may run for an hour)', async () => {
    const adapter = withDeadlines(silent({ signals: [] }), { writeMs: 10, observeMs: 10, busyMs: 10 });
    const stop = new AbortController();
    const following = adapter.waitForTurn(target, 'r', { onRunning: async () => undefined }, stop.signal);
    const early = await Promise.race([
      following.then(
        () => 'ended',
        () => 'ended',
      ),
      new Promise((r) => setTimeout(() => r('still following'), 100)),
    ]);
    expect(early).toBe('still following');
    stop.abort(new Error('stop'));
    await expect(following).rejects.toThrow('stop');
  });
});
