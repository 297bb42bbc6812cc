/**
 * Where Baton's Redis is, read from `REDIS_URL`:
 * - `redis://[user:pass@]host:port[/db]` or `rediss://...`: one Redis server;
 * - `redis+cluster://[user:pass@]host:port[,host:port...]` or `rediss+cluster://...`: a Redis
 *   Cluster, given by one or more seed nodes (the client learns the rest from them). A
 *   cluster has no databases, so a path other than `/` is refused.
 * Pure: config validation and openRedis both read it.
 */
export type RedisTarget =
  | { readonly kind: 'single'; readonly url: string }
  | {
      readonly kind: 'cluster';
      readonly nodes: ReadonlyArray<{ readonly host: string; readonly port: number }>;
      readonly username?: string;
      readonly password?: string;
      readonly tls: boolean;
    };

export class RedisTargetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RedisTargetError';
  }
}

const SCHEMES = ['redis:', 'rediss:', 'redis+cluster:', 'rediss+cluster:'] as const;

export function parseRedisTarget(raw: string): RedisTarget {
  const scheme = /^([a-z+]+:)\/\//i.exec(raw)?.[1]?.toLowerCase();
  if (!scheme || !(SCHEMES as readonly string[]).includes(scheme)) {
    throw new RedisTargetError(`REDIS_URL must start with ${SCHEMES.map((s) => `${s}//`).join(', ')}`);
  }
  if (!scheme.includes('+cluster')) {
    try {
      new URL(raw);
    } catch {
      throw new RedisTargetError('REDIS_URL is not a URL');
    }
    return { kind: 'single', url: raw };
  }
  let rest = raw.slice(scheme.length + 2);
  const slash = rest.indexOf('/');
  if (slash >= 0) {
    const path = rest.slice(slash);
    if (path !== '/' && path !== '')
      throw new RedisTargetError('a redis+cluster:// URL takes no database or path (a cluster has only database 0)');
    rest = rest.slice(0, slash);
  }
  const at = rest.lastIndexOf('@');
  const userinfo = at >= 0 ? rest.slice(0, at) : '';
  const hosts = at >= 0 ? rest.slice(at + 1) : rest;
  const nodes = hosts.split(',').map((item) => {
    const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+):(\d{1,5})$/i.exec(item.trim());
    const port = Number(m?.[2]);
    if (!m || port < 1 || port > 65535) throw new RedisTargetError(`redis+cluster:// seed node ${JSON.stringify(item)} must be host:port`);
    return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
  });
  let username: string | undefined;
  let password: string | undefined;
  if (userinfo !== '') {
    const colon = userinfo.indexOf(':');
    username = decodeURIComponent(colon >= 0 ? userinfo.slice(0, colon) : userinfo) || undefined;
    password = colon >= 0 ? decodeURIComponent(userinfo.slice(colon + 1)) : undefined;
  }
  return {
    kind: 'cluster',
    nodes,
    ...(username !== undefined ? { username } : {}),
    ...(password !== undefined ? { password } : {}),
    tls: scheme === 'rediss+cluster:',
  };
}
