import { describe, expect, it } from 'vitest';
import { HandoffRepository, type HandoffCounter, type HandoffPatch, type TransitionWrite } from '../../libs/db/handoff-repository.ts';
import { forgetTransitionTexts } from '../../libs/db/handoff-sql/build-transition.ts';
import type { Queryable } from '../../libs/db/prepared.ts';

/**
 * The repository keeps one transition text per shape and hands the same string out again
 * (cheap to name and to check against pg's prepared statements). Kept texts must be exactly
 * what a fresh build of each write gives: a choice that changes the text but is missing from
 * the shape would run another write's statement.
 */

/** Captures what the repository sends; answers as if the row did not move. */
function capture(): { pool: Queryable; texts: string[]; values: unknown[][] } {
  const texts: string[] = [];
  const values: unknown[][] = [];
  const pool: Queryable = {
    query: async (config) => {
      texts.push(config.text);
      values.push(config.values ?? []);
      return { rows: [], command: 'UPDATE', rowCount: 0, oid: 0, fields: [] };
    },
  };
  return { pool, texts, values };
}

/** A small deterministic generator, so a failure names a reproducible write. */
function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

const ID = (n: number) => `0190f7c4-3333-7000-8000-${String(n).padStart(12, '0')}`;
const event = (i: number) => ({
  event: `e${i}`,
  actorKind: 'system' as const,
  actorId: `w${i}`,
  reason: i % 2 ? null : `r${i}`,
  detail: i % 3 ? null : { i },
});

/** A write with every option chosen at random (patch keys in random order too). */
function randomWrite(r: () => number, i: number): TransitionWrite {
  const pick = () => r() < 0.5;
  const patchKeys: Array<keyof HandoffPatch> = ['deliveryDetail', 'notBefore', 'resultSummary', 'result', 'settledAt', 'inProgressKey'];
  const patch: HandoffPatch = {};
  for (const key of [...patchKeys].sort(() => r() - 0.5)) {
    if (!pick()) continue;
    const values: Record<keyof HandoffPatch, unknown> = {
      deliveryDetail: `d${i}`,
      notBefore: new Date(i),
      resultSummary: null,
      result: { i },
      settledAt: new Date(i),
      inProgressKey: null,
    };
    // undefined leaves a column alone: it must not change the text.
    (patch as Record<string, unknown>)[key] = r() < 0.2 ? undefined : values[key];
  }
  const counters: HandoffCounter[] = ['attemptCount', 'refusals', 'errorResends', 'interruptResends'];
  const steps = Array.from({ length: 1 + Math.floor(r() * 3) }, (_, k) => ({
    from: 'ACCEPTED' as const,
    to: 'RUNNING' as const,
    event: event(i + k),
  }));
  const results = [undefined, 'succeeded', 'failed', 'cleared'] as const;
  return {
    handoffId: ID(i),
    steps,
    expectRevision: pick() ? i : null,
    at: new Date(i),
    ...(pick() ? { patch } : {}),
    ...(pick() ? { increment: counters.filter(pick) } : {}),
    ...(pick()
      ? {
          insertAttempt: {
            id: ID(i + 1),
            number: i,
            requestId: ID(i + 2),
            workerId: `w${i}`,
            deliveryTarget: null,
            ...(pick() ? { fence: BigInt(i) } : {}),
          },
        }
      : {}),
    ...(pick()
      ? {
          updateAttempt: {
            id: ID(i + 3),
            status: 'returned' as const,
            ...(pick() ? { error: pick() ? null : `err ${i}` } : {}),
            ...(pick() ? { accepted: pick() } : {}),
            ...(pick() ? { finished: pick() } : {}),
            ...(pick() ? { observed: pick() } : {}),
            ...(pick() ? { absentScan: pick() } : {}),
          },
        }
      : {}),
    ...(pick() ? { moveOthers: { recipientId: ID(i + 4), from: 'WAITING' as const, to: 'BUSY' as const, event: event(i) } } : {}),
    ...(pick() ? { moveWork: { from: ['open'], to: 'returned', event: event(i), result: results[Math.floor(r() * results.length)] } } : {}),
    ...(pick()
      ? {
          thenNextWork: {
            recipientId: ID(i + 5),
            now: new Date(i),
            deployment: `dep${i}`,
            ...(pick()
              ? {
                  reserve: {
                    attemptId: ID(i + 6),
                    requestId: ID(i + 7),
                    workerId: `w${i}`,
                    fence: BigInt(i),
                    provider: 'demo',
                    passing: { none: pick(), rules: pick() ? [] : ['allow'] },
                    to: 'SENDING' as const,
                    queued: { to: 'BUSY' as const, event: 'queued', reason: `q${i}` },
                    queuedBusy: pick(),
                  },
                }
              : {}),
          },
        }
      : {}),
  };
}

describe('transition texts kept per shape', () => {
  it('gives every write the text a fresh build gives it (1,500 random writes of 300 random shapes)', async () => {
    // The options come from the generator (seeded per shape), the values from the write's number.
    const writes = Array.from({ length: 1_500 }, (_, i) => randomWrite(random(1_000 + (i % 300)), i * 10));
    const fresh = capture();
    for (const w of writes) {
      forgetTransitionTexts();
      await new HandoffRepository(fresh.pool).transition(w);
    }
    forgetTransitionTexts();
    const kept = capture();
    for (const w of writes) await new HandoffRepository(kept.pool).transition(w);
    const mismatched = writes.map((_, i) => i).filter((i) => kept.texts[i] !== fresh.texts[i]);
    expect(mismatched).toEqual([]);
    expect(kept.values).toEqual(fresh.values);
    // Many writes share a shape: the sample exercised the kept texts, not only first builds.
    expect(new Set(kept.texts).size).toBeLessThanOrEqual(300);
    expect(new Set(kept.texts).size).toBeGreaterThan(100);
  });

  it('hands out the very same string for the same shape, whatever the values', async () => {
    const r = random(7);
    const a = randomWrite(r, 10);
    const b = {
      ...a,
      handoffId: ID(99),
      expectRevision: 41,
      at: new Date(5),
      steps: a.steps.map((s, k) => ({ ...s, event: event(50 + k) })),
    };
    const { pool, texts, values } = capture();
    const repo = new HandoffRepository(pool);
    await repo.transition(a);
    await repo.transition(b);
    expect(texts[1]).toBe(texts[0]);
    expect(values[1]).not.toEqual(values[0]);
  });
});
