// ESLint for the whole tree (`npm run lint`, part of `npm test`): typescript-eslint's
// recommended-type-checked rules, the promise and exhaustiveness rules as errors, and a line-length
// limit for what Prettier cannot break. Layout itself is Prettier's (`npm run format:check`).
// Every rule turned off says why on its line.
import './scripts/eslint-typescript6.mjs';
import js from '@eslint/js';
import stylistic from '@stylistic/eslint-plugin';
import tseslint from 'typescript-eslint';
import globals from 'globals';
import { noSilentCatch } from './scripts/eslint-silent-catch.mjs';

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', '.dist-*/', 'libs/db/generated/', 'coverage/', 'scratch/', '.baton/', 'test-results/'] },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
      globals: { ...globals.node },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { '@stylistic': stylistic, baton: { rules: { 'no-silent-catch': noSilentCatch } } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: false, requireDefaultForNonUnion: false },
      ],
      'baton/no-silent-catch': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
      // Prettier breaks code at 140 columns; this catches the comments and strings it cannot break.
      // Left alone: URLs, regexes, template literals (SQL, messages built from parts) and a test's
      // title, which reads best on one line.
      '@stylistic/max-len': [
        'error',
        {
          code: 160,
          ignoreUrls: true,
          ignoreRegExpLiterals: true,
          ignoreTemplateLiterals: true,
          ignorePattern: String.raw`^\s*(it|test|describe)(\.\w+)?\(['"\x60]`,
        },
      ],
      // An `async` function that does not await still turns a throw into a rejection, which is what
      // the Promise-returning interfaces here (Fastify handlers, adapters, test doubles) rely on.
      '@typescript-eslint/require-await': 'off',
      // Rejections pass on what they were given: an abort signal's reason (`any`) or a caught error.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allow: [{ from: 'package', name: 'URLSearchParams', package: 'url' }] },
      ],
      // The regexes that match control characters (ANSI escapes, NUL bytes) are there to strip or refuse them.
      'no-control-regex': 'off',
      // String() of an unknown JSON or log value is the intended display, '[object Object]' included.
      '@typescript-eslint/no-base-to-string': 'off',
      // A `let` read by closures made before its one assignment (a request the timers may destroy) stays a `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ['test/**', 'services/bench/**', 'services/chaos/**'],
    rules: {
      // Tests (and the benchmark's and chaos run's clients) read the API's JSON replies as `any` and
      // check their shape themselves.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // The browser scripts of the API's web UI: plain JavaScript, outside the TypeScript project.
    files: ['services/api/ui/**/*.js'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
