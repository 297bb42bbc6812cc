import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildImportGraph, describeChain, importCycles, reaches, type ImportGraph } from '../support/import-graph.ts';

/*
 * How the folders may import each other (docs: docs/ARCHITECTURE.md "Where each rule lives",
 * each folder README's "May import"; issue 32 items 1 and 3): main/ (the `baton` entry point,
 * the composition root) → services/ → workers/ → libs/, never back, and no service imports
 * another. Every import counts: value, type-only (`import type`, `import('…').T`) and dynamic
 * (`await import('…')`).
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const graph = buildImportGraph(ROOT, ['libs', 'services', 'workers', 'main'], ['libs/db/generated']);

/** The part of the graph whose files start with `prefix`. */
function within(prefix: string): ImportGraph {
  const inside = (file: string) => file.startsWith(prefix);
  return { files: graph.files.filter(inside), edges: graph.edges.filter((e) => inside(e.from) && inside(e.to)) };
}

const lines = (items: readonly string[]) => items.map((item) => `\n  ${item}`).join('');

describe('the import checker', () => {
  it('follows value, type-only, dynamic and import-type edges and reports a cycle as a chain', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-import-graph-'));
    try {
      mkdirSync(path.join(dir, 'libs/b'), { recursive: true });
      mkdirSync(path.join(dir, 'libs/q'));
      writeFileSync(path.join(dir, 'libs/a.ts'), "import type { B } from './b/b.ts';\nexport const a = 1;\nexport type A = B;\n");
      writeFileSync(path.join(dir, 'libs/b/b.ts'), "import { type C } from '../c.js';\nexport type B = C;\n");
      writeFileSync(
        path.join(dir, 'libs/c.ts'),
        "// import './e.ts' (in a comment: no import, and no such file)\nexport type C = import('./a.ts').A;\nexport const load = () => import('./q/d.ts');\n",
      );
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

  it('no import cycle between files under services/, workers/ or main/, type-only and dynamic imports included', () => {
    // Issue 32 ("no import cycles between files"): the last ones (services/bench report ↔ targets ↔
    // run-bench, services/cli cli-context ↔ profile) went with bench-result.ts, bench-scenarios.ts
    // and usage-error.ts.
    const cycles = ['services/', 'workers/', 'main/'].flatMap((prefix) => importCycles(within(prefix)).map((c) => c.chain));
    expect(
      cycles,
      `import cycles in services/, workers/ or main/ (move what both files need into a module both import):${lines(cycles)}`,
    ).toEqual([]);
  });

  it('no services/* folder imports another services/* folder', () => {
    // Issue 32 item 3: services import libs, never each other. What several services share lives
    // in libs/ (libs/api-client, libs/mcp, libs/processes, libs/terminal, libs/metrics); what the
    // `baton` command starts in another service (the API, bench, chaos) services/cli declares in
    // launchers.ts and the entry point hands in (main/launchers.ts, the one place that imports
    // several services).
    const serviceOf = (file: string) => /^services\/[^/]+/.exec(file)?.[0];
    const across = graph.edges
      .filter((e) => {
        const from = serviceOf(e.from);
        const to = serviceOf(e.to);
        return from !== undefined && to !== undefined && from !== to;
      })
      .map((e) => describeChain(graph, [e.from, e.to]));
    expect(across, `one service imports another (move what both need into libs/, or hand it in from main/):${lines(across)}`).toEqual([]);
  });

  it('libs/config reaches nothing in libs/queue, directly or through another file', () => {
    // Issue 32 item 3: the config is read first and owns no queue; the Redis URL's parser lives
    // in libs/config (redis-target.ts) and libs/queue imports it from there.
    const chains = reaches(graph, 'libs/config', 'libs/queue').map((chain) => describeChain(graph, chain));
    expect(chains, `libs/config reaches libs/queue:${lines(chains)}`).toEqual([]);
  });

  it('libs/ imports nothing from services/, workers/ or main/, workers/ nothing from services/ or main/, services/ nothing from main/', () => {
    const above: Record<string, readonly string[]> = {
      'libs/': ['services/', 'workers/', 'main/'],
      'workers/': ['services/', 'main/'],
      'services/': ['main/'],
    };
    const upwards = graph.edges
      .filter((e) => Object.entries(above).some(([from, tos]) => e.from.startsWith(from) && tos.some((to) => e.to.startsWith(to))))
      .map((e) => describeChain(graph, [e.from, e.to]));
    expect(upwards, `imports that point upwards (libs ← workers ← services ← main):${lines(upwards)}`).toEqual([]);
  });
});

/** Issue 32: a file past ~400 lines is asking to be split by what it owns. */
const MAX_FILE_LINES = 400;

describe('file size', () => {
  it(`no TypeScript file under libs/, services/, workers/ or main/ (libs/db/generated aside) has more than ${MAX_FILE_LINES} lines`, () => {
    const lineCount = (file: string) => {
      const text = readFileSync(path.join(ROOT, file), 'utf8');
      return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    };
    const tooLong = graph.files
      .map((file) => ({ file, count: lineCount(file) }))
      .filter(({ count }) => count > MAX_FILE_LINES)
      .map(({ file, count }) => `${file}: ${count} lines`);
    expect(tooLong, `files over ${MAX_FILE_LINES} lines (split each by what it owns):${lines(tooLong)}`).toEqual([]);
  });
});
