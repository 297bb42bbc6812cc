// typescript-eslint's type-aware rules call TypeScript's JavaScript compiler API, which
// TypeScript 7 (our `tsc`, native) no longer ships. For the linter process only, `require('typescript')`
// (and its `lib/tsserverlibrary`)
// is redirected to @typescript/typescript6 (TypeScript 6.0, the same language as 7 for this code).
// package.json's `overrides` lets typescript-eslint's peer range accept our `typescript` entry;
// this redirect is what it actually loads. Imported first by eslint.config.js. Remove both once
// typescript-eslint runs on TypeScript 7.
import Module, { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const redirects = new Map([
  ['typescript', require.resolve('@typescript/typescript6')],
  ['typescript/lib/tsserverlibrary', require.resolve('@typescript/typescript6/lib/tsserverlibrary')],
]);
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  return resolveFilename.call(this, redirects.get(request) ?? request, ...rest);
};
