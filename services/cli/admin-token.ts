import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BatonConfig } from '../../libs/config/load-config.ts';
import { authenticate, bootstrapAdmin, createToken } from '../../libs/handoffs/manage-tokens.ts';
import type { CoreDeps } from '../../libs/handoffs/ports.ts';
import { writeProfile, writeSecretFile } from './profile.ts';

type Deps = Pick<CoreDeps, 'agents' | 'tokens' | 'clock' | 'logger'>;

export interface AdminTokenFile {
  readonly path: string;
  readonly profilePath: string;
  /** false: a working admin token was there already (nothing written). */
  readonly created: boolean;
  readonly token: string | undefined;
}

const adminTokenPath = (config: BatonConfig) => join(config.home, 'admin.token');

async function stillValid(deps: Deps, path: string): Promise<boolean> {
  if (!existsSync(path)) return false;
  try {
    return (await authenticate(deps, `Bearer ${readFileSync(path, 'utf8').trim()}`)).admin;
  } catch {
    return false;
  }
}

function save(config: BatonConfig, token: string, path: string, overwriteProfile: boolean): void {
  writeSecretFile(path, `${token}\n`);
  if (overwriteProfile || !existsSync(config.profilePath)) {
    writeProfile(config.profilePath, { url: config.api.publicUrl, tokenFile: path });
  }
}

/**
 * `baton init`: makes sure `<BATON_HOME>/admin.token` (mode 0600) holds a working admin token,
 * creating one when it is missing or refused (or always, with `force`), and points the CLI
 * profile at it.
 */
export async function initAdminToken(deps: Deps, config: BatonConfig, force: boolean): Promise<AdminTokenFile> {
  const path = adminTokenPath(config);
  if (!force && (await stillValid(deps, path))) return { path, profilePath: config.profilePath, created: false, token: undefined };
  const { token } = await createToken(deps, { admin: true, name: 'admin (baton init)' });
  save(config, token, path, force);
  return { path, profilePath: config.profilePath, created: true, token };
}

/**
 * The API's first start on a fresh database: with no admin token anywhere, it creates one the
 * way `baton init` does, so `baton serve` then `baton agent add` works with nothing else.
 */
export async function bootstrapAdminToken(deps: Deps, config: BatonConfig): Promise<string | undefined> {
  const token = await bootstrapAdmin(deps);
  if (token === null) return undefined;
  const path = adminTokenPath(config);
  save(config, token, path, false);
  deps.logger.info({ path, profile: config.profilePath }, 'first start: admin token written (mode 0600)');
  return path;
}
