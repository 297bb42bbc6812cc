import { Linter } from 'eslint';
import { describe, expect, it } from 'vitest';
import { noSilentCatch } from '../../scripts/eslint-silent-catch.mjs';

// Protects: a `.catch` that drops an error without a word fails the lint (eslint.config.js), and
// one with a comment saying why, or a handler that does something, passes.
const linter = new Linter({ configType: 'flat' });
const flagged = (code: string) =>
  linter
    .verify(code, [{ plugins: { baton: { rules: { 'no-silent-catch': noSilentCatch } } }, rules: { 'baton/no-silent-catch': 'error' } }])
    .map((m) => m.line);

describe('baton/no-silent-catch', () => {
  it('flags a handler that does nothing: () => undefined, () => {}, () => void 0', () => {
    expect(flagged('p.catch(() => undefined);\nq.catch(() => {});\nr.catch(() => void 0);\n')).toEqual([1, 2, 3]);
  });

  it('passes one with a comment on its line or the line above, and a run of them under one comment', () => {
    expect(flagged('// closing: nothing left to do\np.catch(() => undefined);\nq.catch(() => undefined); // gone already\n')).toEqual([]);
    expect(flagged('// best effort\np.catch(() => undefined);\nq.catch(() => undefined);\n')).toEqual([]);
  });

  it('flags one a line of other code separates from the comment', () => {
    expect(flagged('// best effort\np.catch(() => undefined);\nclose();\nq.catch(() => undefined);\n')).toEqual([4]);
  });

  it('passes handlers that do something, and () => null (a value the caller checks)', () => {
    expect(flagged('p.catch((err) => log.warn({ err }, "failed"));\nconst v = await q.catch(() => null);\n')).toEqual([]);
  });
});
