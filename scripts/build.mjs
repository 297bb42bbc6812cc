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
