import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../libs/processes/embedded-infra.ts';

/** One primary of a test cluster: it can be stopped and started again on the same port. */
export interface ClusterNode {
  readonly port: number;
  readonly running: boolean;
  /** SIGKILL: the node is gone at once, its keys with it (nothing is kept on disk). */
  kill(): Promise<void>;
  /** Starts it again with its nodes.conf: it rejoins the cluster owning the same slots, empty. */
  start(): Promise<void>;
}

export interface TestRedisCluster {
  /** `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`: what REDIS_URL takes. */
  readonly url: string;
  readonly nodes: readonly ClusterNode[];
  /** Resolves once every node answers CLUSTER INFO with cluster_state:ok. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** A port whose cluster bus port (port + 10000) is free too. */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await freePort();
    if (port + 10_000 > 65_535 || taken.has(port)) continue;
    const busFree = await new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port + 10_000, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (busFree) return port;
  }
  throw new Error('no free port pair for a cluster node');
}

/** A one-shot connection to one node that never retries (and reports no errors: callers ask). */
function probe(port: number): Redis {
  const client = new Redis(port, '127.0.0.1', {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 500,
  });
  client.on('error', () => undefined);
  return client;
}

async function answers(port: number): Promise<boolean> {
  const client = probe(port);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

async function clusterState(port: number): Promise<string> {
  const client = probe(port);
  try {
    await client.connect();
    const info = String(await client.call('CLUSTER', 'INFO'));
    return /cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown';
  } catch {
    return 'down';
  } finally {
    client.disconnect();
  }
}

/**
 * A real Redis Cluster of `primaries` primaries (no replicas) on loopback: redis-server with
 * `--cluster-enabled yes` on free ports, joined by `redis-cli --cluster create`. Nothing is kept
 * on disk but each node's nodes.conf, in a temp dir removed by stop().
 */
export async function startRedisCluster(opts: { primaries?: number } = {}): Promise<TestRedisCluster> {
  const primaries = opts.primaries ?? 3;
  const dir = mkdtempSync(join(tmpdir(), 'baton-cluster-'));
  const taken = new Set<number>();
  const ports: number[] = [];
  for (let i = 0; i < primaries; i++) {
    const port = await clusterPort(taken);
    taken.add(port);
    ports.push(port);
  }
  const children = new Map<number, ChildProcess>();
  const killAll = () => {
    for (const child of children.values()) if (child.exitCode === null) child.kill('SIGKILL');
  };
  process.once('exit', killAll);

  const launch = async (port: number) => {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        '2000',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
        '--daemonize',
        'no',
      ],
      { stdio: 'ignore' },
    );
    child.once('error', () => undefined);
    children.set(port, child);
    const deadline = Date.now() + 10_000;
    while (!(await answers(port))) {
      if (child.exitCode !== null)
        throw new Error(`redis-server (cluster node ${port}) exited with code ${child.exitCode}; is redis-server 7 installed?`);
      if (Date.now() > deadline) throw new Error(`cluster node ${port} did not start within 10 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const waitHealthy = async (timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const states = await Promise.all(ports.map(clusterState));
      if (states.every((s) => s === 'ok')) return;
      if (Date.now() > deadline) throw new Error(`cluster not healthy within ${timeoutMs} ms: ${states.join(', ')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  try {
    await Promise.all(ports.map(launch));
    const created = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stderr || created.stdout}`);
    await waitHealthy();
  } catch (err) {
    killAll();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  const nodes: ClusterNode[] = ports.map((port) => ({
    port,
    get running() {
      const child = children.get(port);
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    async kill() {
      const child = children.get(port);
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGKILL');
      await exited;
    },
    start: () => launch(port),
  }));

  return {
    url: `redis+cluster://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`,
    nodes,
    waitHealthy,
    async stop() {
      process.off('exit', killAll);
      await Promise.all(nodes.map((n) => n.kill()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
