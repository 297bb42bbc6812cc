import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/**
 * Temp directories of one test file, removed after its last test (the hook is registered when
 * the file imports this module, so it runs after the file's own afterAll hooks, which stop the
 * processes that use them). Before, each run of the suite left ~60 directories under /tmp.
 */
const made: string[] = [];

afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A new directory `<tmpdir>/<prefix>XXXXXX`, removed after the test file. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
