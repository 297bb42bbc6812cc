import { isIP } from 'node:net';
import { ConfigError } from './config-error.ts';

/**
 * `BATON_TRUST_PROXY`: whether the API believes a reverse proxy's `X-Forwarded-Proto`,
 * `X-Forwarded-Host` and `X-Forwarded-For` (the scheme, host and client address a browser
 * used). `false` (the default): only what the connection itself says; `true`: any peer's; a
 * list: only from those addresses or CIDR ranges (the proxy's). Turn it on only behind a proxy
 * that sets those headers itself, or any client could claim another address or scheme.
 */
export type TrustProxy = boolean | readonly string[];

export function trustProxyOf(env: NodeJS.ProcessEnv): TrustProxy {
  const raw = (env['BATON_TRUST_PROXY'] ?? '').trim();
  if (raw === '' || raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  const list = raw
    .split(',')
    .map((a) => a.trim())
    .filter((a) => a !== '');
  for (const a of list) {
    const [address, bits, extra] = a.split('/');
    const family = isIP(address ?? '');
    const maxBits = family === 6 ? 128 : 32;
    const okBits = bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= maxBits);
    if (family === 0 || !okBits || extra !== undefined) {
      throw new ConfigError(
        `BATON_TRUST_PROXY holds ${JSON.stringify(a)}: give true, false, or the proxy's addresses or CIDR ranges, comma-separated (e.g. 10.0.0.5,172.16.0.0/12)`,
      );
    }
  }
  return Object.freeze(list);
}

/**
 * `BATON_ALLOWED_HOSTS` (comma-separated hostnames), or by default the loopback names, the
 * listen host (unless it is a wildcard) and `BATON_URL`'s hostname: where a browser may use the
 * API from. Ports are not compared: a rebinding attack changes the name, not the port.
 */
export function allowedHostsOf(env: NodeJS.ProcessEnv, listenHost: string, publicUrl: string): readonly string[] {
  const raw = env['BATON_ALLOWED_HOSTS'];
  if (raw !== undefined && raw.trim() !== '') {
    const hosts = raw
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter((h) => h !== '');
    for (const h of hosts) {
      if (!/^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?)$/.test(h)) {
        throw new ConfigError(
          `BATON_ALLOWED_HOSTS holds ${JSON.stringify(h)}: give hostnames without scheme or port (IPv6 in brackets), comma-separated`,
        );
      }
    }
    return Object.freeze(hosts);
  }
  const wildcard = (h: string) => h === '0.0.0.0' || h === '::' || h === '[::]';
  const hosts = new Set(['localhost', '127.0.0.1', '[::1]']);
  for (const h of [listenHost.includes(':') ? `[${listenHost}]` : listenHost, new URL(publicUrl).hostname].map((x) => x.toLowerCase())) {
    if (!wildcard(h)) hosts.add(h);
  }
  return Object.freeze([...hosts]);
}
