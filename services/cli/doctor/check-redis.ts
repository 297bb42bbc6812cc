import { Redis, type RedisOptions } from 'ioredis';
import { parseRedisTarget, type RedisTarget } from '../../../libs/config/redis-target.ts';
import { fail, ok, reasonOf, within, type DoctorCheck } from './doctor-check.ts';

/** BullMQ's floor, and the README's ("Redis 6.2+"). */
const MIN_REDIS_VERSION = [6, 2] as const;

/** The only policy under which Redis never drops a key Baton or BullMQ wrote (jobs, turn locks). */
const REQUIRED_POLICY = 'noeviction';

interface Server {
  readonly host: string;
  readonly port: number;
  readonly info: ReadonlyMap<string, string>;
}

function parseInfo(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) out.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return out;
}

/** A connection that tries once: no reconnects, no ready check (INFO below is the first command, bounded like every other). */
function probeOptions(timeoutMs: number): RedisOptions {
  return {
    lazyConnect: true,
    enableReadyCheck: false,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectionName: 'baton-doctor',
  };
}

/** Connects, runs `use` and disconnects, whatever happens; the whole is bounded by a little over two timeouts. */
async function withServer<T>(client: Redis, timeoutMs: number, use: (c: Redis) => Promise<T>): Promise<T> {
  // A refused connection rejects connect() with "Connection is closed."; the socket's own error says why.
  let socketError: Error | undefined;
  client.on('error', (err: Error) => void (socketError ??= err));
  try {
    return await within(
      (async () => {
        await client.connect();
        return use(client);
      })(),
      2 * timeoutMs + 500,
      'Redis',
    );
  } catch (err) {
    throw socketError ?? err;
  } finally {
    client.disconnect();
  }
}

async function readServer(client: Redis, host: string, port: number, timeoutMs: number): Promise<Server> {
  return withServer(client, timeoutMs, async (c) => ({ host, port, info: parseInfo(await c.info()) }));
}

/** host:port of a single-server URL (never its password). */
function addressOf(target: RedisTarget): string {
  if (target.kind === 'cluster') return target.nodes.map((n) => `${n.host}:${n.port}`).join(',');
  const u = new URL(target.url);
  return `${u.hostname}:${u.port || 6379}`;
}

function versionBelow(version: string, min: readonly [number, number]): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major < min[0] || (major === min[0] && minor < min[1]);
}

function unreachable(err: unknown, where: string, timeoutMs: number): DoctorCheck {
  const reason = reasonOf(err);
  if (/NOAUTH|WRONGPASS|invalid password|invalid username/i.test(reason))
    return fail('redis', `Redis at ${where} refused the login: ${reason}`, 'check the user name and password in REDIS_URL');
  if (/timed? ?out|no answer/i.test(reason))
    return fail(
      'redis',
      `Redis at ${where} gave no answer within ${timeoutMs} ms`,
      'check that the host in REDIS_URL is up and that no firewall drops the connection',
    );
  return fail('redis', `cannot reach Redis at ${where} (${reason})`, 'start Redis, or point REDIS_URL at a running one');
}

/** The cluster's primaries as CLUSTER NODES lists them (`id host:port@bus flags ...`), failed ones left out. */
function primariesOf(nodes: string): Array<{ host: string; port: number }> {
  const out: Array<{ host: string; port: number }> = [];
  for (const line of nodes.split('\n')) {
    const [, address, flags] = line.split(' ');
    if (!address || !flags) continue;
    const f = flags.split(',');
    if (!f.includes('master') || f.includes('fail')) continue;
    const hostPort = address.split('@')[0] ?? '';
    const colon = hostPort.lastIndexOf(':');
    out.push({ host: hostPort.slice(0, colon), port: Number(hostPort.slice(colon + 1)) });
  }
  return out;
}

function policyCheck(servers: readonly Server[]): DoctorCheck {
  const name = 'redis maxmemory-policy';
  const bad = servers.filter((s) => s.info.get('maxmemory_policy') !== REQUIRED_POLICY);
  if (bad.length === 0) return ok(name, `${REQUIRED_POLICY}${servers.length > 1 ? ` on all ${servers.length} primaries` : ''}`);
  const found = bad.map((s) => `${s.info.get('maxmemory_policy') ?? 'unknown'} on ${s.host}:${s.port}`).join(', ');
  const first = bad[0]!;
  return fail(
    name,
    `${found}: Redis may evict BullMQ's jobs and Baton's turn locks when memory runs short`,
    `\`redis-cli -h ${first.host} -p ${first.port} config set maxmemory-policy ${REQUIRED_POLICY}\`${bad.length > 1 ? ' on each' : ''}, and \`maxmemory-policy ${REQUIRED_POLICY}\` in redis.conf so a restart keeps it`,
  );
}

/**
 * Redis at `url` (REDIS_URL): reachable, its version (6.2+), whether it is a cluster and the URL
 * says so, and `maxmemory-policy noeviction` on every server that holds keys. Each connection
 * and command is bounded by `timeoutMs`.
 */
export async function checkRedis(url: string, timeoutMs: number): Promise<DoctorCheck[]> {
  const target = parseRedisTarget(url);
  const where = addressOf(target);
  if (target.kind === 'single') {
    let server: Server;
    try {
      const u = new URL(target.url);
      server = await readServer(new Redis(target.url, probeOptions(timeoutMs)), u.hostname, Number(u.port || 6379), timeoutMs);
    } catch (err) {
      return [unreachable(err, where, timeoutMs)];
    }
    const version = server.info.get('redis_version') ?? 'unknown';
    if (server.info.get('cluster_enabled') === '1') {
      return [
        fail(
          'redis',
          `Redis ${version} at ${where} is a node of a Redis Cluster, but REDIS_URL names one server`,
          `give the cluster's nodes: REDIS_URL=redis+cluster://${where}[,host:port...]`,
        ),
      ];
    }
    if (versionBelow(version, MIN_REDIS_VERSION))
      return [
        fail('redis', `Redis ${version} at ${where}`, `BullMQ needs Redis ${MIN_REDIS_VERSION.join('.')}+: upgrade it`),
        policyCheck([server]),
      ];
    return [ok('redis', `Redis ${version} at ${where}, one server (not a cluster)`), policyCheck([server])];
  }
  // A cluster: ask the first seed node that answers for the primaries, then each primary.
  const nodeOptions: RedisOptions = {
    ...probeOptions(timeoutMs),
    ...(target.username !== undefined ? { username: target.username } : {}),
    ...(target.password !== undefined ? { password: target.password } : {}),
    ...(target.tls ? { tls: {} } : {}),
  };
  let seed: { server: Server; nodes: string; state: string } | undefined;
  let lastError: unknown;
  for (const node of target.nodes) {
    try {
      seed = await withServer(new Redis(node.port, node.host, nodeOptions), timeoutMs, async (c) => {
        const info = parseInfo(await c.info());
        if (info.get('cluster_enabled') !== '1') return { server: { ...node, info }, nodes: '', state: '' };
        const state = parseInfo(String(await c.call('CLUSTER', 'INFO'))).get('cluster_state') ?? 'unknown';
        return { server: { ...node, info }, nodes: String(await c.call('CLUSTER', 'NODES')), state };
      });
      break;
    } catch (err) {
      lastError = err;
    }
  }
  if (!seed) return [unreachable(lastError, where, timeoutMs)];
  const version = seed.server.info.get('redis_version') ?? 'unknown';
  const seedAt = `${seed.server.host}:${seed.server.port}`;
  if (seed.server.info.get('cluster_enabled') !== '1') {
    return [
      fail(
        'redis',
        `Redis ${version} at ${seedAt} is one server, not a cluster, but REDIS_URL says redis+cluster://`,
        `name it as one server: REDIS_URL=redis://${seedAt}`,
      ),
    ];
  }
  const primaries = primariesOf(seed.nodes);
  const servers: Server[] = [];
  for (const p of primaries) {
    try {
      servers.push(
        p.host === seed.server.host && p.port === seed.server.port
          ? seed.server
          : await readServer(new Redis(p.port, p.host, nodeOptions), p.host, p.port, timeoutMs),
      );
    } catch (err) {
      return [unreachable(err, `${p.host}:${p.port} (a primary of the cluster)`, timeoutMs)];
    }
  }
  const checks: DoctorCheck[] = [];
  if (seed.state !== 'ok')
    checks.push(
      fail(
        'redis',
        `Redis ${version} cluster via ${seedAt}: cluster_state is ${seed.state}`,
        'repair the cluster (`redis-cli --cluster check` names what is wrong)',
      ),
    );
  else if (versionBelow(version, MIN_REDIS_VERSION))
    checks.push(fail('redis', `Redis ${version} cluster via ${seedAt}`, `BullMQ needs Redis ${MIN_REDIS_VERSION.join('.')}+: upgrade it`));
  else checks.push(ok('redis', `Redis ${version}, a cluster of ${primaries.length} primaries (cluster_state ok) via ${seedAt}`));
  checks.push(policyCheck(servers));
  return checks;
}
