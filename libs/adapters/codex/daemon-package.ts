import { constants } from 'node:fs';
import { access, lstat, mkdir, readFile, realpath, stat, symlink } from 'node:fs/promises';
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path';

/**
 * The Codex package a Codex home's app-server daemon runs (@openai/codex 0.171.0): the directory
 * this link names, a platform package (`codex-package.json`, `bin/codex`, `codex-resources`,
 * `codex-path`). Codex runs a selected package in place. When the link is missing, the first
 * `daemon start` copies the package of the CLI that ran it into
 * `packages/app-server-daemon/releases/<version>-<target>` and links that: hundreds of MB, and
 * tens of seconds.
 */
export const daemonPackageLink = (codexHome: string): string => join(codexHome, 'packages', 'app-server-daemon', 'current');

/** The Rust target of this host and the npm package that carries it (as @openai/codex's bin/codex.js maps them). */
function platformTarget(): { triple: string; npmPackage: string } | null {
  const byHost: Record<string, { triple: string; npmPackage: string }> = {
    'linux-x64': { triple: 'x86_64-unknown-linux-musl', npmPackage: '@openai/codex-linux-x64' },
    'linux-arm64': { triple: 'aarch64-unknown-linux-musl', npmPackage: '@openai/codex-linux-arm64' },
    'darwin-x64': { triple: 'x86_64-apple-darwin', npmPackage: '@openai/codex-darwin-x64' },
    'darwin-arm64': { triple: 'aarch64-apple-darwin', npmPackage: '@openai/codex-darwin-arm64' },
  };
  return byHost[`${process.platform}-${process.arch}`] ?? null;
}

/**
 * The executable `binary` names: a path (relative to the worker's directory), or a name looked up on
 * PATH (null when no executable file of that name is on it). `baton doctor` finds agents' binaries with it too.
 */
export async function locate(binary: string, path: string | undefined): Promise<string | null> {
  if (binary.includes('/')) return isAbsolute(binary) ? binary : resolve(binary);
  for (const dir of (path ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, binary);
    const ok = await access(candidate, constants.X_OK).then(
      () => true,
      () => false,
    );
    if (
      ok &&
      (await stat(candidate).then(
        (s) => s.isFile(),
        () => false,
      ))
    )
      return candidate;
  }
  return null;
}

/** `dir` if it is a Codex platform package for this host whose entry point exists. */
async function asPackage(dir: string, triple: string): Promise<{ dir: string; version: string } | null> {
  try {
    const meta = JSON.parse(await readFile(join(dir, 'codex-package.json'), 'utf8')) as {
      target?: unknown;
      entrypoint?: unknown;
      version?: unknown;
    };
    if (meta.target !== triple || typeof meta.entrypoint !== 'string') return null;
    await access(join(dir, meta.entrypoint), constants.X_OK);
    return { dir, version: typeof meta.version === 'string' ? meta.version : 'unknown' };
  } catch {
    return null;
  }
}

/**
 * The installed Codex platform package behind `binary`, or why there is none: the npm launcher
 * (`node_modules/.bin/codex` -> `@openai/codex/bin/codex.js`) is followed to the platform package
 * Node would resolve from it (`node_modules/@openai/codex-<os>-<arch>/vendor/<target>`), the way
 * the launcher itself finds its binary; a native `codex` inside such a package is that package.
 */
export async function installedCodexPackage(
  binary: string,
  path: string | undefined,
): Promise<{ dir: string; version: string } | { reason: string }> {
  const target = platformTarget();
  if (!target) return { reason: `Codex packages are not linked on ${process.platform}-${process.arch}` };
  const found = await locate(binary, path);
  if (!found) return { reason: `${binary} is not on the worker's PATH` };
  const real = await realpath(found).catch(() => null);
  if (!real) return { reason: `${found} does not resolve` };
  // A native binary of a platform package: <package>/bin/codex.
  const native = await asPackage(dirname(dirname(real)), target.triple);
  if (native) return native;
  // The npm launcher: <node_modules>/@openai/codex/bin/codex.js.
  const root = dirname(dirname(real));
  const manifest = await readFile(join(root, 'package.json'), 'utf8').then(
    (t) => JSON.parse(t) as { name?: unknown },
    () => null,
  );
  if (manifest?.name !== '@openai/codex')
    return { reason: `${real} is neither the @openai/codex launcher nor a binary of a Codex platform package` };
  for (let dir = root; ; dir = dirname(dir)) {
    const pkg = await asPackage(join(dir, 'node_modules', target.npmPackage, 'vendor', target.triple), target.triple);
    if (pkg) return pkg;
    if (dirname(dir) === dir) break;
  }
  return (
    (await asPackage(join(root, 'vendor', target.triple), target.triple)) ?? {
      reason: `no ${target.npmPackage} package is installed beside ${root}`,
    }
  );
}

export type DaemonPackageOutcome =
  /** The home had a package selected already (Codex's copy, a link, the user's choice): left as it is. */
  | { readonly state: 'selected' }
  /** Baton linked the installed package: no copy. */
  | { readonly state: 'linked'; readonly dir: string; readonly version: string }
  /** No installed package could be found: the daemon's first start copies one (10-25 s). */
  | { readonly state: 'unresolved'; readonly reason: string };

/**
 * Selects the installed Codex package of `binary` for the home's daemon, unless the home has a
 * package selected already (even a dangling link: that is Codex's or the user's to mend). The link
 * is created with symlink(2), which fails if a racing worker made it first; both name the same
 * package. Cheap when the link exists (one lstat), so every daemon start runs it.
 */
export async function ensureDaemonPackage(codexHome: string, binary: string, path: string | undefined): Promise<DaemonPackageOutcome> {
  const link = daemonPackageLink(codexHome);
  const present = await lstat(link).then(
    () => true,
    (err: NodeJS.ErrnoException) => err.code !== 'ENOENT',
  );
  if (present) return { state: 'selected' };
  const pkg = await installedCodexPackage(binary, path);
  if ('reason' in pkg) return { state: 'unresolved', reason: pkg.reason };
  await mkdir(dirname(link), { recursive: true, mode: 0o700 });
  try {
    await symlink(pkg.dir, link);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST')
      return { state: 'unresolved', reason: `cannot link ${link}: ${(err as Error).message}` };
    return { state: 'selected' };
  }
  return { state: 'linked', dir: pkg.dir, version: pkg.version };
}

/** Whether the home's daemon has a package selected (else its first start copies one). */
export async function hasDaemonPackage(codexHome: string): Promise<boolean> {
  return lstat(daemonPackageLink(codexHome)).then(
    () => true,
    () => false,
  );
}
