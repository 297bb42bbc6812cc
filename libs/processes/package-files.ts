import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * The checkout this code runs from, whether it runs as the TypeScript source (tests, through
 * vitest) or as the build in dist/ (everything else): the nearest folder up from here holding
 * bin/baton.mjs. dist/ mirrors the source tree one level down and has no bin/ of its own.
 */
function findCheckout(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'bin', 'baton.mjs'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`no bin/baton.mjs above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}

/** The `baton` command of this checkout, for processes Baton starts (bench, tests) and MCP snippets. */
export const BATON_BIN = path.join(findCheckout(), 'bin', 'baton.mjs');

/**
 * Baton's version, from package.json (dist/package.json, written by scripts/build.mjs, in the
 * build: the same relative path from both trees).
 */
export function batonVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}
