import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildImportGraph, describeChain, importCycles, reaches, type ImportGraph } from '../support/import-graph.ts';

/*
 * How the folders may import each other (docs: libs/handoffs/README.md "May import"; issue 32
 * items 1 and 3). Every import counts: value, type-only (`import type`, `import('…').T`) and
 * dynamic (`await import('…')`).
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const graph = buildImportGraph(ROOT, ['libs', 'services', 'workers'], ['libs/db/generated']);

/** The part of the graph whose files start with `prefix`. */
function within(prefix: string): ImportGraph {
  const inside = (file: string) => file.startsWith(prefix);
  return { files: graph.files.filter(inside), edges: graph.edges.filter((e) => inside(e.from) && inside(e.to)) };
}

const lines = (items: readonly string[]) => items.map((item) => `\n  ${item}`).join('');

/**
 * Holds `found` (a violation's key, and the lines that show it) against an allowance list that
 * may only shrink: a violation not on the list fails, and so does a listed one that is gone
 * (take it off the list, so it cannot come back unnoticed).
 */
function expectOnlyAllowed(rule: string, found: ReadonlyMap<string, readonly string[]>, allowed: readonly string[]): void {
  const problems = [
    ...[...found.keys()].filter((key) => !allowed.includes(key)).map((key) => `new, not on the list (fix the import): ${key}${lines(found.get(key)!)}`),
    ...allowed.filter((key) => !found.has(key)).map((key) => `on the list but no longer found (remove it from the list): ${key}`),
  ];
  expect(problems, `${rule} (the allowance list may only shrink):${lines(problems)}`).toEqual([]);
}

describe('the import checker', () => {
  it('follows value, type-only, dynamic and import-type edges and reports a cycle as a chain', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-import-graph-'));
    try {
      mkdirSync(path.join(dir, 'libs/b'), { recursive: true });
      mkdirSync(path.join(dir, 'libs/q'));
      writeFileSync(path.join(dir, 'libs/a.ts'), "import type { B } from './b/b.ts';\nexport const a = 1;\nexport type A = B;\n");
      writeFileSync(path.join(dir, 'libs/b/b.ts'), "import { type C } from '../c.js';\nexport type B = C;\n");
      writeFileSync(path.join(dir, 'libs/c.ts'), "// import './e.ts' (in a comment: no import, and no such file)\nexport type C = import('./a.ts').A;\nexport const load = () => import('./q/d.ts');\n");
      writeFileSync(path.join(dir, 'libs/q/d.ts'), "export { a } from '../a.ts';\nimport 'node:fs';\n");
      const small = buildImportGraph(dir, ['libs']);
      expect(small.edges).toEqual([
        { from: 'libs/a.ts', to: 'libs/b/b.ts', kinds: ['type'] },
        { from: 'libs/b/b.ts', to: 'libs/c.ts', kinds: ['type'] },
        { from: 'libs/c.ts', to: 'libs/a.ts', kinds: ['type'] },
        { from: 'libs/c.ts', to: 'libs/q/d.ts', kinds: ['dynamic'] },
        { from: 'libs/q/d.ts', to: 'libs/a.ts', kinds: ['value'] },
      ]);
      expect(importCycles(small).map((c) => c.chain)).toEqual([
        'libs/a.ts → (type) libs/b/b.ts → (type) libs/c.ts → (dynamic) libs/q/d.ts → libs/a.ts',
        'libs/a.ts → (type) libs/b/b.ts → (type) libs/c.ts → (type) libs/a.ts',
      ]);
      expect(reaches(small, 'libs/q', 'libs/b')).toEqual([['libs/q/d.ts', 'libs/a.ts', 'libs/b/b.ts']]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('import rules', () => {
  it('no import cycle between files under libs/, type-only and dynamic imports included', () => {
    const cycles = importCycles(within('libs/')).map((c) => c.chain);
    expect(cycles, `import cycles in libs/ (move what both files need into a module both import):${lines(cycles)}`).toEqual([]);
  });

  it('no import cycle between files under services/ or workers/, type-only and dynamic imports included', () => {
    // Issue 32 ("no import cycles between files"): the last ones (services/bench report ↔ targets ↔
    // run-bench, services/cli cli-context ↔ profile) went with bench-result.ts, bench-scenarios.ts
    // and usage-error.ts.
    const cycles = ['services/', 'workers/'].flatMap((prefix) => importCycles(within(prefix)).map((c) => c.chain));
    expect(cycles, `import cycles in services/ or workers/ (move what both files need into a module both import):${lines(cycles)}`).toEqual([]);
  });

  it('a services/* folder imports no other services/* folder but the known ones, each to be removed', () => {
    // Issue 32 item 3: services import libs, never each other. What several services share lives
    // in libs/ (libs/api-client, libs/processes, libs/terminal, libs/metrics, libs/mcp). What is
    // left: the `baton` command starts every process (services/cli is the one entry point). The
    // list may only shrink.
    const KNOWN_SERVICE_IMPORTS = [
      'services/cli → services/api', // start-stack: the API server
      'services/cli → services/bench', // `baton bench`
      'services/cli → services/chaos', // `baton chaos`
    ];
    const serviceOf = (file: string) => /^services\/[^/]+/.exec(file)?.[0];
    const found = new Map<string, string[]>();
    for (const edge of graph.edges) {
      const from = serviceOf(edge.from);
      const to = serviceOf(edge.to);
      if (from === undefined || to === undefined || from === to) continue;
      const key = `${from} → ${to}`;
      found.set(key, [...(found.get(key) ?? []), describeChain(graph, [edge.from, edge.to])]);
    }
    expectOnlyAllowed('one service imports another', found, KNOWN_SERVICE_IMPORTS);
  });

  it('libs/config reaches nothing in libs/queue, directly or through another file', () => {
    // Issue 32 item 3: the config is read first and owns no queue; the Redis URL's parser lives
    // in libs/config (redis-target.ts) and libs/queue imports it from there.
    const chains = reaches(graph, 'libs/config', 'libs/queue').map((chain) => describeChain(graph, chain));
    expect(chains, `libs/config reaches libs/queue:${lines(chains)}`).toEqual([]);
  });

  it('libs/ imports nothing from services/ or workers/, and workers/ nothing from services/', () => {
    const upwards = graph.edges
      .filter((e) => (e.from.startsWith('libs/') && !e.to.startsWith('libs/')) || (e.from.startsWith('workers/') && e.to.startsWith('services/')))
      .map((e) => describeChain(graph, [e.from, e.to]));
    expect(upwards, `imports that point upwards (libs ← workers ← services):${lines(upwards)}`).toEqual([]);
  });
});
