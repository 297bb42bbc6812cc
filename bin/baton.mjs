#!/usr/bin/env node
// The `baton` command: runs the JavaScript compiled at install (`npm install` builds dist/ with
// scripts/build.mjs); no TypeScript compiler at run time.
import { existsSync } from 'node:fs';

const main = new URL('../dist/main/baton.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('baton: not built (dist/ is missing): run `npm install` or `npm run build` in the checkout\n');
  process.exit(1);
}
await import(main.href);
