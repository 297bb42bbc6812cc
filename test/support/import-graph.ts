import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseSync } from 'oxc-parser';

/**
 * How one file refers to another: a value import or re-export, a type-only one (`import type`,
 * `import { type X }` with every name a type, `export type … from`, `import('…').T` in a type), or
 * an `import()` expression. Every kind counts as an edge: a type-only cycle still ties the files'
 * meaning together, and a dynamic one still ties their loading.
 */
export type ImportKind = 'value' | 'type' | 'dynamic';

export interface ImportEdge {
  /** Both paths are relative to the root, with `/` separators. */
  from: string;
  to: string;
  kinds: ImportKind[];
}

export interface ImportGraph {
  files: string[];
  edges: ImportEdge[];
}

type AstNode = Record<string, unknown>;

const isNode = (value: unknown): value is AstNode => value !== null && typeof value === 'object' && !Array.isArray(value);

/** The string at `node.k1.k2…`, if every step is there. */
function stringAt(node: AstNode, ...keys: string[]): string | undefined {
  let at: unknown = node;
  for (const key of keys) at = isNode(at) ? at[key] : undefined;
  return typeof at === 'string' ? at : undefined;
}

/** A file's relative specifiers and how each is used (a bare package name is not followed). */
export function importsOf(fileName: string, source: string): Map<string, Set<ImportKind>> {
  const parsed = parseSync(fileName, source, { sourceType: 'module' });
  if (parsed.errors.length > 0) {
    throw new Error(`${fileName} does not parse: ${parsed.errors.map((e) => e.message).join('; ')}`);
  }
  const found = new Map<string, Set<ImportKind>>();
  const add = (specifier: string | undefined, kind: ImportKind) => {
    if (specifier === undefined || !specifier.startsWith('.')) return;
    const kinds = found.get(specifier) ?? new Set<ImportKind>();
    kinds.add(kind);
    found.set(specifier, kinds);
  };
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const child of node) visit(child);
      return;
    }
    if (!isNode(node)) return;
    const allOfKind = (key: string, kindKey: string) => {
      const list = Array.isArray(node[key]) ? node[key].filter(isNode) : [];
      return list.length > 0 && list.every((s) => s[kindKey] === 'type');
    };
    switch (node.type) {
      case 'ImportDeclaration':
        add(stringAt(node, 'source', 'value'), node.importKind === 'type' || allOfKind('specifiers', 'importKind') ? 'type' : 'value');
        return;
      case 'ExportNamedDeclaration':
        if (isNode(node.source))
          add(stringAt(node, 'source', 'value'), node.exportKind === 'type' || allOfKind('specifiers', 'exportKind') ? 'type' : 'value');
        break;
      case 'ExportAllDeclaration':
        add(stringAt(node, 'source', 'value'), node.exportKind === 'type' ? 'type' : 'value');
        return;
      case 'ImportExpression':
        add(stringAt(node, 'source', 'value'), 'dynamic');
        break;
      case 'TSImportType':
        add(stringAt(node, 'source', 'value') ?? stringAt(node, 'argument', 'literal', 'value'), 'type');
        break;
      case 'TSExternalModuleReference':
        add(stringAt(node, 'expression', 'value'), 'value');
        break;
    }
    for (const [key, child] of Object.entries(node)) {
      if (key !== 'type' && child !== null && typeof child === 'object') visit(child);
    }
  };
  visit(parsed.program);
  return found;
}

function sourceFilesUnder(root: string, dir: string, skip: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = `${dir}/${entry.name}`;
    if (skip.has(rel) || entry.name === 'node_modules') continue;
    if (entry.isDirectory()) out.push(...sourceFilesUnder(root, rel, skip));
    else if (/\.(ts|mts|tsx)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(rel);
  }
  return out;
}

function resolveSpecifier(root: string, from: string, specifier: string): string | undefined {
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  const candidates = [base, base.replace(/\.js$/, '.ts'), base.replace(/\.mjs$/, '.mts'), `${base}.ts`, `${base}/index.ts`];
  for (const candidate of candidates) {
    try {
      if (statSync(path.join(root, candidate)).isFile()) return candidate;
    } catch {
      // not this candidate: try the next spelling
    }
  }
  return undefined;
}

/**
 * The import graph of every TypeScript file under `dirs` (relative to `root`), `skip` aside.
 * Edges go only between files of the graph: an import that leaves it (a package, a folder not
 * listed) is not an edge. An import that names a file that does not exist throws, so a typo
 * cannot hide an edge.
 */
export function buildImportGraph(root: string, dirs: readonly string[], skip: readonly string[] = []): ImportGraph {
  const skipSet = new Set(skip);
  const files = dirs.flatMap((dir) => sourceFilesUnder(root, dir, skipSet)).sort();
  const inGraph = new Set(files);
  const edges: ImportEdge[] = [];
  for (const from of files) {
    const imports = importsOf(from, readFileSync(path.join(root, from), 'utf8'));
    const byTarget = new Map<string, Set<ImportKind>>();
    for (const [specifier, kinds] of imports) {
      const to = resolveSpecifier(root, from, specifier);
      if (to === undefined) throw new Error(`${from}: import '${specifier}' names no file`);
      if (!inGraph.has(to)) continue;
      const all = byTarget.get(to) ?? new Set<ImportKind>();
      for (const kind of kinds) all.add(kind);
      byTarget.set(to, all);
    }
    for (const [to, kinds] of [...byTarget].sort(([a], [b]) => a.localeCompare(b))) {
      edges.push({ from, to, kinds: [...kinds].sort() });
    }
  }
  return { files, edges };
}

/** Strongly connected components with more than one file, or a file that imports itself (Tarjan). */
function tangledComponents(graph: ImportGraph): string[][] {
  const next = successors(graph.edges);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let counter = 0;
  const connect = (file: string): void => {
    index.set(file, counter);
    low.set(file, counter);
    counter += 1;
    stack.push(file);
    onStack.add(file);
    for (const to of next.get(file) ?? []) {
      if (!index.has(to)) {
        connect(to);
        low.set(file, Math.min(low.get(file)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(file, Math.min(low.get(file)!, index.get(to)!));
      }
    }
    if (low.get(file) === index.get(file)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== file);
      const selfLoop = (next.get(file) ?? []).includes(file);
      if (component.length > 1 || selfLoop) components.push(component.sort());
    }
  };
  for (const file of graph.files) if (!index.has(file)) connect(file);
  return components;
}

export interface ImportCycle {
  /** The files in import order, the alphabetically first one first (not repeated at the end). */
  files: string[];
  /** `a.ts → b.ts → a.ts`, each type-only edge marked `(type)` and each dynamic one `(dynamic)`. */
  chain: string;
}

/** `a.ts → b.ts → …`, marking each edge that is not a plain value import with its kinds. */
export function describeChain(graph: ImportGraph, files: readonly string[]): string {
  const kindsOf = new Map(graph.edges.map((e) => [`${e.from}\n${e.to}`, e.kinds]));
  return files
    .map((file, i) => {
      if (i === 0) return file;
      const kinds = kindsOf.get(`${files[i - 1]}\n${file}`) ?? [];
      return kinds.includes('value') ? `→ ${file}` : `→ (${kinds.join(', ')}) ${file}`;
    })
    .join(' ');
}

function successors(edges: readonly ImportEdge[]): Map<string, string[]> {
  const next = new Map<string, string[]>();
  for (const edge of edges) next.set(edge.from, [...(next.get(edge.from) ?? []), edge.to]);
  return next;
}

/** The shortest import chain from `from` to a file that `isTarget` accepts (breadth first), or null. */
function shortestChain(next: ReadonlyMap<string, readonly string[]>, from: string, isTarget: (file: string) => boolean): string[] | null {
  const cameFrom = new Map<string, string>([[from, from]]);
  const queue = [from];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const to of next.get(file) ?? []) {
      if (cameFrom.has(to)) continue;
      cameFrom.set(to, file);
      if (isTarget(to)) {
        const chain = [to];
        for (let at = to; at !== from;) {
          at = cameFrom.get(at)!;
          chain.unshift(at);
        }
        return chain;
      }
      queue.push(to);
    }
  }
  return null;
}

/** For each file under `fromDir` that reaches a file under `toDir`, directly or not: the shortest chain. */
export function reaches(graph: ImportGraph, fromDir: string, toDir: string): string[][] {
  const next = successors(graph.edges);
  const chains: string[][] = [];
  for (const file of graph.files.filter((f) => f.startsWith(`${fromDir}/`))) {
    const chain = shortestChain(next, file, (to) => to.startsWith(`${toDir}/`));
    if (chain) chains.push(chain);
  }
  return chains;
}

/**
 * Every import cycle: for each edge inside a tangle of files, the shortest cycle through it,
 * each cycle once. Breaking every listed cycle untangles the graph.
 */
export function importCycles(graph: ImportGraph): ImportCycle[] {
  const cycles = new Map<string, ImportCycle>();
  for (const component of tangledComponents(graph)) {
    const members = new Set(component);
    const next = successors(graph.edges.filter((e) => members.has(e.from) && members.has(e.to)));
    for (const [from, targets] of next) {
      for (const to of targets) {
        // The edge from → to, then the shortest way from `to` back to `from`.
        const back = to === from ? [from] : shortestChain(next, to, (file) => file === from)!;
        const loop = [from, ...back.slice(0, -1)];
        const first = loop.indexOf([...loop].sort()[0]!);
        const files = [...loop.slice(first), ...loop.slice(0, first)];
        cycles.set(files.join('\n'), { files, chain: describeChain(graph, [...files, files[0]!]) });
      }
    }
  }
  return [...cycles.values()].sort((a, b) => a.chain.localeCompare(b.chain));
}
