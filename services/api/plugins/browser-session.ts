import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RedisClient } from '../../../libs/queue/open-redis.ts';
import { BatonError } from '../../../libs/domain/errors.ts';
import { authenticateSecretHash, type AuthDeps } from '../../../libs/handoffs/manage-tokens.ts';
import type { Caller } from '../../../libs/handoffs/caller.ts';
import type { RedisNames } from '../../../libs/queue/redis-names.ts';
import { API_DEFAULTS } from '../../../libs/config/component-defaults.ts';

/** The cookie a signed-in browser carries: an opaque random id, nothing else. */
export const SESSION_COOKIE = 'baton_session';
/** The header a browser session's state-changing request repeats its CSRF token in. */
export const CSRF_HEADER = 'x-csrf-token';
/** How long a browser session lives after sign-in (it is not extended by use). */
export const SESSION_TTL_MS = API_DEFAULTS.browserSessionTtlMs;

/** What the API needs to serve browsers: where sessions live and which Host names it answers. */
export interface BrowserAccessOptions {
  readonly redis: RedisClient;
  readonly names: RedisNames;
  /** Hostnames (lower case, no port; IPv6 in brackets) browsers may use: `BATON_ALLOWED_HOSTS`. */
  readonly allowedHosts: readonly string[];
  /** Set the cookie's Secure attribute even on plain HTTP (TLS ends at a proxy in front). */
  readonly secureCookies?: boolean;
  readonly ttlMs?: number;
}

/** One browser session as Redis keeps it: the token's sha256 (never the token), its CSRF token, its end. */
interface StoredSession {
  readonly tokenHash: string;
  readonly csrf: string;
  readonly expiresAt: string;
}

/** A session as a route sees it once its cookie was proven. */
export interface BrowserSession {
  readonly caller: Caller;
  readonly csrfToken: string;
  readonly expiresAt: Date;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}$/;
const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The hostname of a Host header or an Origin, lower case, without its port (IPv6 keeps its brackets). */
export function hostnameOf(hostHeader: string): string {
  const h = hostHeader.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.indexOf(':');
  return colon === -1 ? h : h.slice(0, colon);
}

/** The session cookie's value, if the request carries one of the right shape. */
export function sessionCookieOf(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1 || part.slice(0, eq).trim() !== SESSION_COOKIE) continue;
    const value = part.slice(eq + 1).trim();
    return COOKIE_VALUE.test(value) ? value : undefined;
  }
  return undefined;
}

/**
 * Browser sessions: an admin or agent trades its bearer token for a random cookie (HttpOnly,
 * SameSite=Strict, Secure over HTTPS) that stands for that token for `SESSION_TTL_MS`. Redis
 * keeps, under the sha256 of the cookie, the token's sha256 and a CSRF token; every request
 * proves the token again (a revoked token ends its sessions at once) and so sees exactly what
 * the token may see. Sessions are shared by every API process of the deployment.
 */
export class BrowserSessions {
  readonly allowedHosts: ReadonlySet<string>;
  private readonly ttlMs: number;

  constructor(private readonly opts: BrowserAccessOptions) {
    this.allowedHosts = new Set(opts.allowedHosts.map((h) => h.toLowerCase()));
    this.ttlMs = opts.ttlMs ?? SESSION_TTL_MS;
  }

  /**
   * Refuses a request whose Host is not an allowed hostname: a page on another name that
   * resolves to this API (DNS rebinding) gets nothing, not even the sign-in page.
   * @throws BatonError host_not_allowed
   */
  requireAllowedHost(request: FastifyRequest): void {
    // The Host header, or a trusted proxy's X-Forwarded-Host (BATON_TRUST_PROXY).
    const host = request.host;
    if (typeof host !== 'string' || !this.allowedHosts.has(hostnameOf(host))) {
      throw new BatonError(
        'host_not_allowed',
        `this API answers browsers only as ${[...this.allowedHosts].join(', ')} (BATON_ALLOWED_HOSTS)`,
      );
    }
  }

  /**
   * A request that changes something must come from this API's own pages: an `Origin` naming
   * the same host (browsers send it on every such request). Sign-in needs this too, so no other
   * site can sign a browser in under its own token.
   * @throws BatonError csrf_failed
   */
  requireSameOrigin(request: FastifyRequest): void {
    const origin = request.headers.origin;
    // The scheme and host the browser used: a trusted proxy's X-Forwarded-Proto/-Host (BATON_TRUST_PROXY), else the connection's.
    const host = request.host;
    let same: boolean;
    try {
      // Both through URL, so a default port (":80") written on one side only still matches.
      same =
        typeof origin === 'string' &&
        typeof host === 'string' &&
        new URL(origin).origin === new URL(`${request.protocol}://${host}`).origin;
    } catch {
      same = false;
    }
    if (!same) {
      throw new BatonError('csrf_failed', "this request changes something and did not come from this API's own pages (Origin)");
    }
  }

  /** Opens a session for a token proven by its sha256; sets the cookie on `reply`. */
  async open(request: FastifyRequest, reply: FastifyReply, tokenHash: string, caller: Caller): Promise<BrowserSession> {
    const id = randomBytes(32).toString('base64url');
    const csrf = randomBytes(32).toString('base64url');
    const expiresAt = new Date(Date.now() + this.ttlMs);
    const stored: StoredSession = { tokenHash, csrf, expiresAt: expiresAt.toISOString() };
    await this.opts.redis.set(this.opts.names.browserSession(sha256(id)), JSON.stringify(stored), 'PX', this.ttlMs);
    reply.header('set-cookie', this.cookie(request, id, Math.floor(this.ttlMs / 1000)));
    return { caller, csrfToken: csrf, expiresAt };
  }

  /** Ends the request's session (if any) and clears its cookie. */
  async close(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const id = sessionCookieOf(request);
    if (id) await this.opts.redis.del(this.opts.names.browserSession(sha256(id)));
    reply.header('set-cookie', this.cookie(request, '', 0));
  }

  /**
   * The session a request's cookie stands for, its token proven again, with the Host checked
   * and, for a request that changes something, its Origin and CSRF token.
   * @throws BatonError host_not_allowed, unauthenticated (no cookie, or an unknown or expired
   *   session), invalid_token (its token was revoked), csrf_failed
   */
  async resolve(request: FastifyRequest, core: AuthDeps): Promise<BrowserSession> {
    this.requireAllowedHost(request);
    const id = sessionCookieOf(request);
    const raw = id ? await this.opts.redis.get(this.opts.names.browserSession(sha256(id))) : null;
    if (!raw) throw new BatonError('unauthenticated', 'no browser session, or it expired: sign in again at /ui/sign-in');
    const stored = JSON.parse(raw) as StoredSession;
    if (UNSAFE.has(request.method)) {
      this.requireSameOrigin(request);
      const sent = request.headers[CSRF_HEADER];
      if (typeof sent !== 'string' || !sameSecret(sent, stored.csrf)) {
        throw new BatonError(
          'csrf_failed',
          `a browser session's request that changes something must repeat the session's CSRF token in ${CSRF_HEADER}`,
        );
      }
    }
    const caller = await authenticateSecretHash(core, stored.tokenHash);
    return { caller, csrfToken: stored.csrf, expiresAt: new Date(stored.expiresAt) };
  }

  private cookie(request: FastifyRequest, value: string, maxAgeSeconds: number): string {
    const secure = this.opts.secureCookies === true || request.protocol === 'https';
    return `${SESSION_COOKIE}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
  }
}
