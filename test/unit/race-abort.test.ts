import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { anyAbort, followAbort } from '../../libs/adapters/race-abort.ts';

/** Signals that follow others (race-abort.ts): AbortSignal.any's behaviour, one listener per source. */

let warnings: Error[] = [];
const onWarning = (w: Error) => warnings.push(w);
beforeEach(() => {
  warnings = [];
  process.on('warning', onWarning);
});
afterEach(() => {
  process.off('warning', onWarning);
});

describe('following abort signals', () => {
  it("aborts with the source's reason, at once when it came before, and not after the follower let go", () => {
    const source = new AbortController();
    const follower = new AbortController();
    followAbort(source.signal, follower);
    source.abort(new Error('draining'));
    expect(follower.signal.reason).toEqual(new Error('draining'));

    const late = new AbortController();
    followAbort(source.signal, late);
    expect(late.signal.aborted).toBe(true);
    expect(late.signal.reason).toEqual(new Error('draining'));

    const other = new AbortController();
    const gone = new AbortController();
    const unfollow = followAbort(other.signal, gone);
    unfollow();
    other.abort(new Error('after'));
    expect(gone.signal.aborted).toBe(false);
  });

  it('takes the reason of the first source that aborts, as AbortSignal.any does', () => {
    const a = new AbortController();
    const b = new AbortController();
    const linked = anyAbort([a.signal, b.signal]);
    const native = AbortSignal.any([a.signal, b.signal]);
    b.abort(new Error('lock lost'));
    a.abort(new Error('draining'));
    expect(linked.signal.reason).toEqual(new Error('lock lost'));
    expect(linked.signal.reason).toBe(native.reason);

    const c = new AbortController();
    const d = new AbortController();
    d.abort(new Error('already'));
    const early = anyAbort([c.signal, d.signal]);
    expect(early.signal.reason).toEqual(new Error('already'));
    expect(early.signal.reason).toBe(AbortSignal.any([c.signal, d.signal]).reason);
  });

  it('keeps one listener on a source shared by many followers at once, warns of no leak, and holds nobody after unlink', async () => {
    const shared = new AbortController();
    const runs = Array.from({ length: 50 }, () => anyAbort([shared.signal, new AbortController().signal]));
    expect(getEventListeners(shared.signal, 'abort')).toHaveLength(1);
    for (const run of runs.slice(0, 25)) run.unlink();
    shared.abort(new Error('shutting down'));
    expect(runs.slice(0, 25).every((r) => !r.signal.aborted)).toBe(true);
    expect(runs.slice(25).every((r) => r.signal.reason instanceof Error && r.signal.reason.message === 'shutting down')).toBe(true);
    // Node emits the warning on the next tick: let it reach the listener first.
    await new Promise((r) => setImmediate(r));
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });
});
