import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GroupCommit, type InFlightAtDeadline } from '../../libs/db/group-commit.ts';
import { isDatabaseUnavailable } from '../../libs/db/classify-error.ts';

/**
 * Client-side group commit with a statement the test answers by hand: which calls share a
 * batch, how many batches are out at once, and what a failed batch does to each of its calls.
 * (The batched enrollment on a real Postgres: test/integration/batched-enrollment.test.ts.)
 */
function harness(opts: {
  maxInFlight: number;
  maxBatch: number;
  isolate?: (err: unknown) => boolean;
  deadlineMs?: number;
  inFlightAtDeadline?: InFlightAtDeadline;
}) {
  const batches: Array<{ items: number[]; answer: (fail?: Error) => void }> = [];
  const commit = new GroupCommit<number, string>(
    (items) =>
      new Promise<string[]>((resolve, reject) => {
        batches.push({ items, answer: (fail) => (fail === undefined ? resolve(items.map((i) => `row ${i}`)) : reject(fail)) });
      }),
    {
      maxInFlight: opts.maxInFlight,
      maxBatch: opts.maxBatch,
      isolate: opts.isolate ?? (() => true),
      deadlineMs: opts.deadlineMs,
      ...(opts.inFlightAtDeadline ? { inFlightAtDeadline: opts.inFlightAtDeadline } : {}),
    },
  );
  return { commit, batches };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('GroupCommit', () => {
  it('sends the calls of one turn of the event loop as one batch, each answered with its own row', async () => {
    const { commit, batches } = harness({ maxInFlight: 4, maxBatch: 64 });
    const answers = [1, 2, 3].map((i) => commit.submit(i));
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1, 2, 3]]);
    batches[0]!.answer();
    expect(await Promise.all(answers)).toEqual(['row 1', 'row 2', 'row 3']);
  });

  it('a call of a quiet process goes alone after its turn, without waiting for company', async () => {
    const { commit, batches } = harness({ maxInFlight: 4, maxBatch: 64 });
    const one = commit.submit(7);
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[7]]);
    batches[0]!.answer();
    expect(await one).toBe('row 7');
  });

  it('keeps at most maxInFlight batches out; what comes meanwhile goes together when one returns', async () => {
    const { commit, batches } = harness({ maxInFlight: 2, maxBatch: 64 });
    const first = commit.submit(1);
    await turn();
    const second = commit.submit(2);
    await turn();
    const waiting = [3, 4, 5].map((i) => commit.submit(i));
    await turn();
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1], [2]]);
    batches[0]!.answer();
    expect(await first).toBe('row 1');
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1], [2], [3, 4, 5]]);
    batches[1]!.answer();
    batches[2]!.answer();
    expect(await Promise.all([second, ...waiting])).toEqual(['row 2', 'row 3', 'row 4', 'row 5']);
  });

  it('splits what waits into batches of maxBatch', async () => {
    const { commit, batches } = harness({ maxInFlight: 8, maxBatch: 2 });
    const all = [1, 2, 3, 4, 5].map((i) => commit.submit(i));
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1, 2], [3, 4], [5]]);
    for (const b of batches) b.answer();
    expect(await Promise.all(all)).toHaveLength(5);
  });

  it('a failed batch is tried again item by item, so one bad item fails only its own call', async () => {
    const { commit, batches } = harness({ maxInFlight: 4, maxBatch: 64 });
    const all = [1, 2, 3].map((i) =>
      commit.submit(i).then(
        (v) => ({ v }),
        (err: Error) => ({ err: err.message }),
      ),
    );
    await turn();
    batches[0]!.answer(new Error('value too long in row 2'));
    await turn();
    expect(batches.slice(1).map((b) => b.items)).toEqual([[1], [2], [3]]);
    batches[1]!.answer();
    batches[2]!.answer(new Error('value too long'));
    batches[3]!.answer();
    expect(await Promise.all(all)).toEqual([{ v: 'row 1' }, { err: 'value too long' }, { v: 'row 3' }]);
  });

  it('an error that is not about the items (isolate says no) fails every call of the batch, with no retries', async () => {
    const { commit, batches } = harness({ maxInFlight: 4, maxBatch: 64, isolate: () => false });
    const all = [1, 2].map((i) => commit.submit(i).catch((err: Error) => err.message));
    await turn();
    batches[0]!.answer(new Error('Connection terminated'));
    expect(await Promise.all(all)).toEqual(['Connection terminated', 'Connection terminated']);
    expect(batches).toHaveLength(1);
  });

  it('a batch slot freed by a failure is used by what waited', async () => {
    const { commit, batches } = harness({ maxInFlight: 1, maxBatch: 64, isolate: () => false });
    const first = commit.submit(1).catch(() => 'failed');
    await turn();
    const later = commit.submit(2);
    await turn();
    expect(batches).toHaveLength(1);
    batches[0]!.answer(new Error('Connection terminated'));
    expect(await first).toBe('failed');
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1], [2]]);
    batches[1]!.answer();
    expect(await later).toBe('row 2');
  });
});

/**
 * Each call's deadline (the database bound its caller has, connect + query timeout): a stalled
 * Postgres must not make what waits behind the batches in flight wait one timeout per round.
 */
describe('GroupCommit deadlines', () => {
  const DEADLINE_MS = 40;
  // The deadline timers and the clock are the test's (setImmediate stays real, so a batch still
  // goes out after its turn): a busy machine that runs timers late cannot reorder the flush and
  // the deadline here.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const pastDeadline = () => vi.advanceTimersByTimeAsync(DEADLINE_MS);
  const outcome = (p: Promise<string>) =>
    p.then(
      (v) => ({ v, at: Date.now() }),
      (err: unknown) => ({ err, at: Date.now() }),
    );

  it('a call still waiting for a batch when its deadline passes fails with database_unavailable, and is never sent, also once the stalled batch returns', async () => {
    const { commit, batches } = harness({ maxInFlight: 1, maxBatch: 64, deadlineMs: DEADLINE_MS, inFlightAtDeadline: 'wait' });
    const first = commit.submit(1);
    await turn();
    const submitted = Date.now();
    const pending = outcome(commit.submit(2));
    await pastDeadline();
    const waiting = await pending;
    expect('err' in waiting && isDatabaseUnavailable(waiting.err), 'the waiting call failed as database_unavailable').toBe(true);
    expect(waiting.at - submitted).toBeGreaterThanOrEqual(DEADLINE_MS);
    expect(batches.map((b) => b.items)).toEqual([[1]]);
    // The stalled statement answers at last (wait: its caller gets it); what waited is gone.
    batches[0]!.answer();
    expect(await first).toBe('row 1');
    await turn();
    await turn();
    expect(
      batches.map((b) => b.items),
      'the failed call was never written',
    ).toEqual([[1]]);
  });

  it("'answer': a call whose batch is in Postgres fails at its deadline; the statement's late result is dropped, and its slot stays taken until it returns", async () => {
    const { commit, batches } = harness({ maxInFlight: 1, maxBatch: 64, deadlineMs: DEADLINE_MS, inFlightAtDeadline: 'answer' });
    const inFlight = outcome(commit.submit(1));
    await turn();
    expect(batches).toHaveLength(1);
    await pastDeadline();
    const answered = await inFlight;
    expect('err' in answered && isDatabaseUnavailable(answered.err)).toBe(true);
    const next = commit.submit(2);
    await turn();
    expect(batches, 'the stalled statement still holds the one slot').toHaveLength(1);
    batches[0]!.answer();
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1], [2]]);
    batches[1]!.answer();
    expect(await next).toBe('row 2');
  });

  it("'wait': a call whose batch is in Postgres gets the statement's answer, also after its deadline", async () => {
    const { commit, batches } = harness({ maxInFlight: 1, maxBatch: 64, deadlineMs: DEADLINE_MS, inFlightAtDeadline: 'wait' });
    const inFlight = commit.submit(1);
    await turn();
    // Past the deadline: a later call waiting behind the batch has failed by now.
    const later = outcome(commit.submit(2));
    await pastDeadline();
    await later;
    batches[0]!.answer();
    expect(await inFlight).toBe('row 1');
  });

  it('a failed batch is not run again item by item for calls past their deadline: nothing is written after its caller was told it failed', async () => {
    const { commit, batches } = harness({ maxInFlight: 1, maxBatch: 64, deadlineMs: DEADLINE_MS, inFlightAtDeadline: 'answer' });
    const all = [1, 2].map((i) => outcome(commit.submit(i)));
    await turn();
    await pastDeadline();
    const answered = await Promise.all(all);
    expect(answered.every((a) => 'err' in a && isDatabaseUnavailable(a.err))).toBe(true);
    batches[0]!.answer(new Error('value too long in row 2'));
    await turn();
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1, 2]]);
  });
});
