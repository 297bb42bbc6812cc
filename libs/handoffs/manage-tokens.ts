import { createHash, randomBytes } from 'node:crypto';
import { BatonError } from '../domain/errors.ts';
import { isUuid, newId } from '../domain/ids.ts';
import type { TokenRecord, TokenRepository } from '../db/token-repository.ts';
import type { CoreDeps } from './ports.ts';
import { resolveProject } from './resolve-project.ts';
import type { Caller } from './caller.ts';
import type { TokenCache } from './token-cache.ts';

export const TOKEN_PREFIX = 'baton_';
const TOKEN_RE = /^baton_[A-Za-z0-9_-]{43}$/;

export const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

/** A fresh secret: 32 random bytes, shown once, stored only as its sha256. */
export function newSecret(): string {
  return `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/**
 * What proving a caller touches: the token look-up by secret hash, and the process's cache of
 * look-ups (absent: every call asks Postgres). A test counts look-ups with a plain object.
 */
export interface AuthDeps {
  readonly tokens: Pick<TokenRepository, 'findBySecretHash'>;
  readonly tokenCache?: TokenCache | undefined;
}

/** What a revocation touches: the one statement, the cache it empties, the clock, the log. */
export interface RevokeDeps extends Pick<CoreDeps, 'tokenCache' | 'clock' | 'logger'> {
  readonly tokens: Pick<TokenRepository, 'revoke'>;
}

/**
 * Proves a caller from an `Authorization` header value.
 * @throws BatonError unauthenticated (missing or not a Bearer token of Baton's shape),
 *   invalid_token (unknown, revoked, or issued to an agent since removed, also when its handle
 *   was registered again: a token belongs to one generation of its agent)
 */
export async function authenticate(deps: AuthDeps, authorization: string | undefined): Promise<Caller> {
  if (!authorization)
    throw new BatonError('unauthenticated', 'send Authorization: Bearer <token> (baton token create, or the admin token from baton init)');
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!m) throw new BatonError('unauthenticated', 'the Authorization header is not "Bearer <token>": send Authorization: Bearer baton_…');
  // Well formed, but no token Baton ever issued has this shape: as unknown as any other.
  if (!TOKEN_RE.test(m[1]!))
    throw new BatonError(
      'unauthenticated',
      'unknown or revoked token (a Baton token is baton_ and 43 more characters): check BATON_TOKEN or your profile',
    );
  return authenticateSecretHash(deps, hashToken(m[1]!));
}

/**
 * Proves a caller from the sha256 of its token, as a browser session keeps it (the secret
 * itself is not kept), with the same checks as a bearer token on every call: a revoked token,
 * or one whose agent was removed, ends its sessions at the next request in the process that
 * revoked it and within a second in every other (the process's token cache, token-cache.ts).
 * @throws BatonError invalid_token
 */
export async function authenticateSecretHash(deps: AuthDeps, secretHash: string): Promise<Caller> {
  const cached = deps.tokenCache?.get(secretHash);
  if (cached) return cached;
  const started = deps.tokenCache?.begin();
  const t = await deps.tokens.findBySecretHash(secretHash);
  if (!t || t.revokedAt !== null || t.agentRemoved)
    throw new BatonError('invalid_token', 'unknown or revoked token (or its agent was removed): create a new one with baton token create');
  const caller: Caller = {
    tokenId: t.id,
    admin: t.isAdmin,
    agent: t.agentId && t.agentHandle ? { id: t.agentId, handle: t.agentHandle } : null,
    projectSlug: t.projectSlug,
  };
  if (started) deps.tokenCache!.put(secretHash, caller, started);
  return caller;
}

/**
 * Creates a token and returns its secret (the only time it is seen). An agent token is bound
 * to one agent in one project; an admin token to no project.
 * @throws BatonError project_not_found, agent_not_found
 */
export async function createToken(
  deps: Pick<CoreDeps, 'agents' | 'tokens' | 'clock' | 'logger'>,
  input: {
    admin: boolean;
    project?: string | undefined;
    agent?: string | undefined;
    name?: string | undefined;
    /** The secret to register (one of Baton's shape, checked by the caller); absent: a fresh one. */
    secret?: string | undefined;
  },
): Promise<{ token: string; record: TokenRecord }> {
  let projectId: string | null = null;
  let agentId: string | null = null;
  let agentGeneration: number | null = null;
  if (!input.admin) {
    if (!input.agent) throw new BatonError('validation_failed', 'an agent token names its agent');
    const project = await resolveProject(deps, input.project ?? 'default');
    const agent = await deps.agents.findActive(project.id, input.agent.toLowerCase());
    if (!agent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(input.agent)} in project ${project.slug}`);
    projectId = project.id;
    agentId = agent.id;
    // The token is this generation's: if the agent is removed (even before the insert lands)
    // and its handle registered again, the token stays refused.
    agentGeneration = agent.generation;
  }
  const token = input.secret ?? newSecret();
  const at = deps.clock.now();
  const record = await deps.tokens.create({
    id: newId(at.getTime()),
    name: input.name ?? (input.admin ? 'admin' : `${input.agent!.toLowerCase()}@${input.project ?? 'default'}`),
    secretHash: hashToken(token),
    isAdmin: input.admin,
    projectId,
    agentId,
    agentGeneration,
    at,
  });
  deps.logger.info({ tokenId: record.id, admin: record.isAdmin, agentId }, 'token created');
  return { token, record };
}

export async function listTokens(deps: Pick<CoreDeps, 'agents' | 'tokens'>, project?: string): Promise<TokenRecord[]> {
  const p = project ? await resolveProject(deps, project) : null;
  return deps.tokens.list(p?.id ?? null);
}

/**
 * Revokes a token: refused from the next request on in this process, and within a second in
 * every other (token-cache.ts). @throws BatonError token_not_found
 */
export async function revokeToken(deps: RevokeDeps, id: string): Promise<void> {
  if (!isUuid(id) || !(await deps.tokens.revoke(id, deps.clock.now())))
    throw new BatonError('token_not_found', `no live token ${JSON.stringify(id)}`);
  deps.tokenCache?.invalidate();
  deps.logger.info({ tokenId: id }, 'token revoked');
}

/**
 * A fresh install's first admin token: created when no live admin token exists (null
 * otherwise). `baton init` and the API's first start call it; the caller writes the secret to
 * a file only its owner can read.
 */
export async function bootstrapAdmin(deps: Pick<CoreDeps, 'agents' | 'tokens' | 'clock' | 'logger'>): Promise<string | null> {
  if (await deps.tokens.anyAdmin()) return null;
  return (await createToken(deps, { admin: true, name: 'admin (baton init)' })).token;
}

/**
 * Registers `secret` (BATON_ADMIN_TOKEN: a token generated beforehand, kept in a Secret) as an
 * admin token, once: `present` when it is one already. The secret is never logged or shown.
 * @throws BatonError validation_failed (not of Baton's shape), invalid_token (it was revoked, or
 *   is another kind of token: set a new one)
 */
export async function registerAdminToken(
  deps: Pick<CoreDeps, 'agents' | 'tokens' | 'clock' | 'logger'>,
  secret: string,
): Promise<'registered' | 'present'> {
  if (!TOKEN_RE.test(secret))
    throw new BatonError('validation_failed', 'BATON_ADMIN_TOKEN must be baton_ and 43 more characters: `baton token generate` prints one');
  const t = await deps.tokens.findBySecretHash(hashToken(secret));
  if (t !== null && (t.revokedAt !== null || !t.isAdmin))
    throw new BatonError(
      'invalid_token',
      `BATON_ADMIN_TOKEN is ${t.revokedAt !== null ? 'a revoked' : 'an agent'} token: generate a new one (baton token generate)`,
    );
  if (t !== null) return 'present';
  await createToken(deps, { admin: true, name: 'admin (BATON_ADMIN_TOKEN)', secret });
  return 'registered';
}
