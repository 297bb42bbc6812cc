#!/usr/bin/env node
// The `baton` command: runs the JavaScript compiled at install (`npm install` builds dist/ with
// scripts/build.mjs); no TypeScript compiler at run time. It runs the start-up bundle of that
// build (dist/bundle/baton.js: a few files instead of some 2,000 modules) when the build made one,
// else dist/main/baton.js, the same code module by module.
import { existsSync } from 'node:fs';

const main = new URL('../dist/main/baton.js', import.meta.url);
const bundled = new URL('../dist/bundle/baton.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('baton: not built (dist/ is missing): run `npm install` or `npm run build` in the checkout\n');
  process.exit(1);
}
await import((existsSync(bundled) ? bundled : main).href);
