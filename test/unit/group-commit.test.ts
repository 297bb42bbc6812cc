import { describe, expect, it } from 'vitest';
import { GroupCommit } from '../../libs/db/group-commit.ts';
import { batchesInFlight } from '../../libs/db/handoff-repository.ts';

/**
 * Client-side group commit with a statement the test answers by hand: which calls share a
 * batch, how many batches are out at once, and what a failed batch does to each of its calls.
 * (The batched enrollment on a real Postgres: test/integration/batched-enrollment.test.ts.)
 */
function harness(opts: { maxInFlight: number; maxBatch: number; isolate?: (err: unknown) => boolean }) {
  const batches: Array<{ items: number[]; answer: (fail?: unknown) => void }> = [];
  const commit = new GroupCommit<number, string>(
    (items) =>
      new Promise<string[]>((resolve, reject) => {
        batches.push({ items, answer: (fail) => (fail === undefined ? resolve(items.map((i) => `row ${i}`)) : reject(fail)) });
      }),
    { maxInFlight: opts.maxInFlight, maxBatch: opts.maxBatch, isolate: opts.isolate ?? (() => true) },
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
    const all = [1, 2, 3].map((i) => commit.submit(i).then((v) => ({ v }), (err: Error) => ({ err: err.message })));
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
