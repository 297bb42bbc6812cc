import { describe, expect, it } from 'vitest';
import { drainWakeUps, QueueSlots, type WakeDrain } from '../../workers/delivery/drain-wake-ups.ts';
import { silentLogger } from '../support/test-baton.ts';

/**
 * The wake job's loop over a queue's wake-up set, with the set as a plain list and dispatch runs
 * the test ends by hand: how many run at once, what is taken when, and what a stop and a failed
 * run leave behind. (The set and its scheduled flag on a real Redis: test/integration/delivery-queues.test.ts.)
 */
function harness(agents: string[], limit: number, opts: { failing?: string[]; working?: number } = {}) {
  const set = [...agents];
  const takes: number[] = [];
  const lingered: boolean[] = [];
  const finish = new Map<string, () => void>();
  const started: string[] = [];
  const retried: string[] = [];
  let wakeJobsAdded = 0;
  let maxInFlight = 0;
  const consumer: string[] = [];
  const draining = new AbortController();
  const slots = new QueueSlots(
    limit,
    { pause: () => consumer.push('pause'), resume: () => consumer.push('resume') },
    opts.working ?? limit,
  );
  const drain: WakeDrain = {
    queue: '{delivery-demo-0}',
    slots,
    take: async (count, lingering) => {
      takes.push(count);
      lingered.push(lingering);
      return set.splice(0, count);
    },
    addWakeJob: async () => {
      wakeJobsAdded++;
    },
    dispatch: (agentId) => {
      started.push(agentId);
      maxInFlight = Math.max(maxInFlight, slots.running.size + 1);
      if (opts.failing?.includes(agentId)) return Promise.reject(new Error('postgres unreachable'));
      return new Promise<void>((resolve) => finish.set(agentId, resolve));
    },
    retryLater: async (agentId) => {
      retried.push(agentId);
    },
    draining: draining.signal,
    logger: silentLogger(),
  };
  return {
    drain,
    slots,
    consumer,
    set,
    takes,
    lingered,
    finish,
    started,
    retried,
    draining,
    wakeJobsAdded: () => wakeJobsAdded,
    maxInFlight: () => maxInFlight,
  };
}

/** No lingering: the first take that finds the set empty clears the queue's scheduled flag. */
const NO_LINGER = { totalMs: 0, pollMs: 0 };

/** Waits (real time, bounded) until `cond` holds. */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 2));
  expect(cond()).toBe(true);
}

/** Lets the loop run until it waits on something the test controls. */
const settle = () => new Promise((r) => setImmediate(r));

describe('draining a wake-up set', () => {
  it('starts a run per agent, oldest first, taking only as many as there are free slots, until the set is empty', async () => {
    const h = harness(['a', 'b', 'c'], 4);
    const done = drainWakeUps(h.drain, NO_LINGER);
    await settle();
    expect(h.started).toEqual(['a', 'b', 'c']);
    for (const id of ['a', 'b', 'c']) h.finish.get(id)!();
    expect(await done).toBe(3);
    // The second take found the set empty (which clears the queue's scheduled flag); no wake job was added.
    expect(h.takes).toEqual([4, 1]);
    expect(h.lingered).toEqual([false, false]);
    expect(h.wakeJobsAdded()).toBe(0);
    expect(h.consumer).toEqual([]);
    expect(h.slots.running.size).toBe(0);
  });

  it('counts a run that follows a turn in its slot but not among the runs at work: another starts in its place, within the slots', async () => {
    const h = harness(['a', 'b', 'c', 'd', 'e', 'f'], 4, { working: 2 });
    const done = drainWakeUps(h.drain, NO_LINGER, { batch: 1, waitMs: 60_000 });
    await settle();
    // Two at work, though four slots are free.
    expect(h.started).toEqual(['a', 'b']);
    expect(h.slots.free).toBe(0);
    // `a` follows its turn: one more starts.
    const aFollows = new Promise<void>((resolve) => h.finish.set('a-turn', resolve));
    const a = h.slots.follow(() => aFollows);
    await until(() => h.started.length === 3);
    expect(h.started).toEqual(['a', 'b', 'c']);
    expect(h.slots.following).toBe(1);
    // `b` and `c` follow too: one more (four slots in all, not five).
    const bc = [
      h.slots.follow(() => new Promise<void>((resolve) => h.finish.set('b-turn', resolve))),
      h.slots.follow(() => new Promise<void>((resolve) => h.finish.set('c-turn', resolve))),
    ];
    await until(() => h.started.length === 4);
    await settle();
    expect(h.started).toEqual(['a', 'b', 'c', 'd']);
    expect(h.slots.free).toBe(0);
    // `a`'s turn ends and its run ends: its slot goes to `e`.
    h.finish.get('a-turn')!();
    await a;
    expect(h.slots.following).toBe(2);
    h.finish.get('a')!();
    await until(() => h.started.length === 5);
    for (const id of ['b-turn', 'c-turn']) h.finish.get(id)!();
    await Promise.all(bc);
    for (const id of ['b', 'c', 'd', 'e']) h.finish.get(id)!();
    await until(() => h.started.length === 6);
    h.finish.get('f')!();
    expect(await done).toBe(6);
    expect(h.slots.following).toBe(0);
    expect(h.slots.running.size).toBe(0);
  });

  it('with every slot busy, leaves the rest to a new wake job once, takes no jobs of the queue, and goes on taking as its runs end', async () => {
    const h = harness(['a', 'b', 'c', 'd', 'e'], 2);
    const done = drainWakeUps(h.drain, NO_LINGER);
    await settle();
    expect(h.started).toEqual(['a', 'b']);
    expect(h.wakeJobsAdded()).toBe(1);
    expect(h.consumer).toEqual(['pause']);
    expect(h.set).toEqual(['c', 'd', 'e']);
    h.finish.get('a')!();
    await until(() => h.started.length === 3);
    expect(h.started).toEqual(['a', 'b', 'c']);
    for (const id of ['b', 'c']) h.finish.get(id)!();
    await until(() => h.started.length === 5);
    expect(h.maxInFlight()).toBe(2);
    // Full again, but one wake job added only; the consumer resumes when it stops taking.
    expect(h.wakeJobsAdded()).toBe(1);
    for (const id of ['d', 'e']) h.finish.get(id)!();
    expect(await done).toBe(5);
    expect(h.consumer).toEqual(['pause', 'resume']);
  });

  it('with every slot busy, takes again in batches: once `batch` slots are free, or `waitMs` after the first one freed', async () => {
    const agents = Array.from({ length: 12 }, (_, i) => `a${i}`);
    const h = harness(agents, 6);
    const done = drainWakeUps(h.drain, NO_LINGER, { batch: 3, waitMs: 60_000 });
    await settle();
    expect(h.takes).toEqual([6]);
    // One run ends: no take yet (one slot free, the batch is three).
    h.finish.get('a0')!();
    await settle();
    await settle();
    expect(h.takes).toEqual([6]);
    h.finish.get('a1')!();
    h.finish.get('a2')!();
    await until(() => h.started.length === 9);
    expect(h.takes).toEqual([6, 3]);
    // Six more end: a batch again, and the rest of the set is taken.
    for (const id of ['a3', 'a4', 'a5', 'a6', 'a7', 'a8']) h.finish.get(id)!();
    await until(() => h.started.length === 12);
    for (const id of agents.slice(9)) h.finish.get(id)!();
    expect(await done).toBe(12);
    expect(h.maxInFlight()).toBe(6);
  });

  it('takes what is free once waitMs has passed, even short of a batch', async () => {
    const h = harness(['a', 'b', 'c', 'd'], 2);
    const done = drainWakeUps(h.drain, NO_LINGER, { batch: 2, waitMs: 30 });
    await settle();
    h.finish.get('a')!();
    await until(() => h.started.length === 3);
    expect(h.takes).toEqual([2, 1]);
    for (const id of ['b', 'c']) h.finish.get(id)!();
    await until(() => h.started.length === 4);
    h.finish.get('d')!();
    expect(await done).toBe(4);
  });

  it('on shutdown takes nothing more and leaves the rest to a new wake job', async () => {
    const h = harness(['a', 'b', 'c'], 4);
    h.draining.abort();
    expect(await drainWakeUps(h.drain, NO_LINGER)).toBe(0);
    expect(h.takes).toEqual([]);
    expect(h.wakeJobsAdded()).toBe(1);
    expect(h.set).toEqual(['a', 'b', 'c']);
    expect(h.consumer).toEqual([]);
  });

  it('a run that fails outright gets a wake-up for later, and the others go on', async () => {
    const h = harness(['a', 'b'], 4, { failing: ['a'] });
    const done = drainWakeUps(h.drain, NO_LINGER);
    await settle();
    h.finish.get('b')!();
    expect(await done).toBe(2);
    expect(h.retried).toEqual(['a']);
  });

  it('counts runs of the queue started by other wake jobs in this process against the free slots', async () => {
    const h = harness(['a', 'b'], 2);
    let endOther!: () => void;
    h.slots.track(new Promise<void>((r) => (endOther = r)));
    const done = drainWakeUps(h.drain, NO_LINGER);
    await settle();
    expect(h.takes[0]).toBe(1);
    expect(h.started).toEqual(['a']);
    endOther();
    await until(() => h.started.length === 2);
    h.finish.get('a')!();
    h.finish.get('b')!();
    expect(await done).toBe(2);
  });

  it('while its runs go, a drainer that finds the set empty keeps the queue scheduled and takes what arrives when a run ends: no new job for it', async () => {
    const h = harness(['a'], 4);
    const done = drainWakeUps(h.drain, { totalMs: 60_000, pollMs: 60_000 });
    await settle();
    expect(h.started).toEqual(['a']);
    await until(() => h.lingered.length === 2);
    // Found empty while a's run goes: the queue stays scheduled (a producer adds no job now).
    expect(h.lingered).toEqual([false, true]);
    h.set.push('b');
    h.finish.get('a')!();
    await until(() => h.started.length === 2);
    expect(h.started).toEqual(['a', 'b']);
    h.finish.get('b')!();
    expect(await done).toBe(2);
    // With no run of its own left, its last take clears the queue's scheduled flag.
    expect(h.lingered.at(-1)).toBe(false);
    expect(h.wakeJobsAdded()).toBe(0);
  });

  it('stops lingering after totalMs even while its runs go, clearing the scheduled flag, then waits for them', async () => {
    const h = harness(['a'], 4);
    let finished = false;
    const done = drainWakeUps(h.drain, { totalMs: 20, pollMs: 5 }).then((n) => {
      finished = true;
      return n;
    });
    await until(() => h.lingered.at(-1) === false && h.lingered.length > 2);
    // Looked again every pollMs, then the take that clears the flag.
    expect(h.lingered[0]).toBe(false);
    expect(h.lingered.slice(1, -1).every((l) => l)).toBe(true);
    expect(finished).toBe(false);
    h.finish.get('a')!();
    expect(await done).toBe(1);
  });
});
