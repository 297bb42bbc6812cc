import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { UsageError } from './usage-error.ts';

/**
 * The CLI profile: a JSON file (mode 0600) with the API's `url`, the `project`, and the token,
 * either inline (`token`) or in a file of its own (`tokenFile`, e.g. the admin token `baton
 * init` writes). BATON_TOKEN, BATON_URL, BATON_PROJECT and the flags override it.
 */
export interface Profile {
  readonly url?: string;
  readonly project?: string;
  readonly token?: string;
}

/** Refuses a secret file others can read, as ssh does: its token would be everyone's. */
function readSecretFile(path: string): string {
  const mode = statSync(path).mode & 0o777;
  if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
    throw new UsageError(`${path} is readable by others (mode ${mode.toString(8)}); run: chmod 600 ${path}`);
  }
  return readFileSync(path, 'utf8');
}

export function readProfile(path: string): Profile | undefined {
  if (!existsSync(path)) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(readSecretFile(path));
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`${path} is not a JSON profile: ${(err as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null) throw new UsageError(`${path} is not a JSON object`);
  const p = raw as Record<string, unknown>;
  const str = (k: string) => (typeof p[k] === 'string' && p[k] !== '' ? p[k] : undefined);
  const tokenFile = str('tokenFile');
  const token =
    str('token') ?? (tokenFile ? readSecretFile(isAbsolute(tokenFile) ? tokenFile : resolve(dirname(path), tokenFile)).trim() : undefined);
  return {
    ...(str('url') ? { url: str('url')! } : {}),
    ...(str('project') ? { project: str('project')! } : {}),
    ...(token ? { token } : {}),
  };
}

/** Only the profile's URL, for a token that came from elsewhere; an unreadable profile is no error then. */
export function profileUrlOnly(path: string): Profile | undefined {
  try {
    const url = readProfile(path)?.url;
    return url ? { url } : undefined;
  } catch {
    return undefined;
  }
}

/** Writes a file only its owner can read (0600), creating its folder (0700) if needed. */
export function writeSecretFile(path: string, content: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, content, { mode: 0o600 });
  chmodSync(path, 0o600); // an existing file keeps its old mode otherwise
}

export function writeProfile(path: string, profile: { url?: string; project?: string; token?: string; tokenFile?: string }): void {
  writeSecretFile(path, `${JSON.stringify(profile, null, 2)}\n`);
}
