import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { migrate } from '../../libs/db/migrate.ts';
import {
  freePort,
  startEmbeddedPostgres,
  startPrivateRedis,
  type EmbeddedPostgres,
  type Started,
} from '../../libs/processes/embedded-infra.ts';
import { spawnBaton, type BatonProcess } from '../../libs/processes/spawn-baton.ts';
import { FaultProxy } from './fault-proxy.ts';
import { ProcessLogs } from './process-logs.ts';
import type { ProcessFate } from './uncertain-summary.ts';

/**
 * The settings every chaos process runs with, through the same environment variables an
 * operator sets: short lock, stall and reconcile intervals so that recovery from a fault takes
 * seconds, and UNCERTAIN deliveries settled by two history scans two seconds apart instead of
 * three over an hour, so the run can wait for every handoff to end.
 */
export const CHAOS_PROCESS_SETTINGS = {
  BATON_QUEUE_SHARDS: '4',
  BATON_DB_POOL_SIZE: '6',
  BATON_DB_QUERY_TIMEOUT_MS: '3000',
  BATON_DB_CONNECT_TIMEOUT_MS: '2000',
  BATON_TURN_LOCK_TTL_MS: '1500',
  BATON_JOB_LOCK_MS: '1500',
  BATON_STALLED_INTERVAL_MS: '500',
  BATON_RECONCILE_INTERVAL_MS: '500',
  BATON_SHUTDOWN_GRACE_MS: '2000',
  BATON_UNOBSERVABLE_AFTER_MS: '15000',
  BATON_UNCERTAIN_SCANS: '2',
  BATON_UNCERTAIN_SCAN_WINDOW_MS: '2000',
  BATON_RATE_LIMIT_PER_SEC: '0',
  BATON_WORKER_PROVIDERS: 'demo',
} as const;

/**
 * How long a worker may take from reading an agent's head of queue to reserving the attempt:
 * the head read itself and a runtime-settings read, each a Postgres statement bounded by the
 * connect and query timeouts (the order invariant allows for it, see invariants.ts).
 */
export const HEAD_READ_TO_RESERVE_MS =
  2 * (Number(CHAOS_PROCESS_SETTINGS.BATON_DB_QUERY_TIMEOUT_MS) + Number(CHAOS_PROCESS_SETTINGS.BATON_DB_CONNECT_TIMEOUT_MS));

export type Role = 'api' | 'worker';

/** A place for one Baton process: its own proxies to Postgres and Redis, and the process in it (or none, after a kill). */
export interface ProcessSlot {
  readonly role: Role;
  readonly name: string;
  readonly postgresProxy: FaultProxy;
  readonly redisProxy: FaultProxy;
  /**
   * The API's URL (api slots). Its port is picked free when the slot is made; a start that finds
   * it taken since (another process's connection got it as its local port) moves it to another.
   */
  apiUrl: string | null;
  process: BatonProcess | null;
  /** Processes started in this slot so far. */
  starts: number;
  /** Set while the run itself stops the process (a SIGKILL fault, the end): its exit is expected. */
  stopping: boolean;
}

/** A process that exited although the run did not stop it; the run restarts it, as a supervisor would. */
export interface UnexpectedExit {
  readonly slot: string;
  readonly at: number;
  readonly code: number | null;
  readonly signal: string | null;
  /** Whether it had started serving (its start line was printed): false is a failed start. */
  readonly wasServing: boolean;
  /** The first line of what it printed last that looks like the reason. */
  readonly reason: string;
  /** A start that found the API's port taken: the harness picked that port, Baton did nothing wrong. */
  readonly portTaken?: boolean;
}

/** How long the run waits before restarting a process that exited by itself (a supervisor's restart delay). */
const RESTART_DELAY_MS = 500;

/**
 * Everything a chaos run needs, all on 127.0.0.1 and all its own: an embedded Postgres and a
 * private redis-server (restartable in place, on the same port and data directory), a shared
 * demo-session host, and one slot per Baton process, each reaching Postgres and Redis through
 * proxies of its own so faults can hit one process's connections or all of them. The run's own
 * reads and writes (set-up, progress, the final checks) go straight to Postgres.
 * `close()` stops every process and server and deletes every temp directory.
 */
export class ChaosEnvironment {
  readonly home = mkdtempSync(join(tmpdir(), 'baton-chaos-'));
  readonly slots: ProcessSlot[] = [];
  readonly pool: pg.Pool;
  demoHostUrl = '';
  adminToken = '';
  /** Exits the run did not cause, in order; each was followed by a restart (not the demo host's). */
  readonly unexpectedExits: UnexpectedExit[] = [];
  /** Baton processes the run SIGKILLed on purpose (its worker-kill faults). */
  killedOnPurpose = 0;
  /** What became of each process, by pid (workers name themselves `<host>-<pid>` in the event log). */
  private readonly fates = new Map<number, ProcessFate>();
  private demoHost: BatonProcess | null = null;
  private readonly logs = new ProcessLogs(join(this.home, 'logs'));
  private closing = false;

  private constructor(
    readonly postgres: EmbeddedPostgres,
    private redis: Started,
    readonly redisPort: number,
  ) {
    this.pool = new pg.Pool({ connectionString: postgres.url, max: 4, application_name: 'baton-chaos', connectionTimeoutMillis: 5_000 });
    // A restart of Postgres breaks idle clients: the pool drops them and opens new ones.
    this.pool.on('error', () => undefined);
  }

  get postgresPort(): number {
    return Number(new URL(this.postgres.url).port);
  }

  /** Starts the servers, migrates, and lays out `apis` + `workers` slots with their proxies (no processes yet). */
  static async start(opts: { apis: number; workers: number }): Promise<ChaosEnvironment> {
    const postgres = await startEmbeddedPostgres();
    let redis: Started;
    try {
      redis = await startPrivateRedis();
    } catch (err) {
      await postgres.stop();
      throw err;
    }
    const env = new ChaosEnvironment(postgres, redis, Number(new URL(redis.url).port));
    try {
      await migrate(postgres.url);
      await env.recordHistory();
      for (let i = 0; i < opts.apis; i++) await env.addSlot('api', `api-${i + 1}`);
      for (let i = 0; i < opts.workers; i++) await env.addSlot('worker', `worker-${i + 1}`);
      const port = await freePort();
      const demoHost = spawnBaton(['demo-host', '--port', String(port)], { BATON_HOME: env.home, BATON_LOG_LEVEL: 'warn' });
      env.demoHost = demoHost;
      env.logs.follow('demo-host', 1, demoHost.child);
      // Nothing restarts it (the sessions and the write log live in it): its exit fails the run.
      void demoHost.exited().then((code) => {
        if (env.closing) return;
        const output = demoHost.output();
        env.unexpectedExits.push({
          slot: 'demo-host',
          at: Date.now(),
          code,
          signal: demoHost.child.signalCode,
          wasServing: /demo sessions on/.test(output),
          reason: exitReason(output),
        });
      });
      await demoHost.waitFor(/demo sessions on/, 30_000);
      env.demoHostUrl = `http://127.0.0.1:${port}`;
    } catch (err) {
      await env.close();
      throw err;
    }
    return env;
  }

  /**
   * The order invariant needs every value `not_before` took and when (Baton keeps only the
   * current one), and when each event and attempt became visible to other statements (its
   * transaction's commit, which on a slow connection can come well after the transition's own
   * time). Triggers of the run's own (schema `chaos`, outside Baton's) write both down: the
   * commit times from constraint triggers deferred to the commit. They change nothing Baton reads.
   */
  private async recordHistory(): Promise<void> {
    await this.pool.query(`
      CREATE SCHEMA IF NOT EXISTS chaos;
      CREATE TABLE IF NOT EXISTS chaos.not_before_log (handoff_id uuid NOT NULL, not_before timestamptz(3), at timestamptz(3) NOT NULL);
      CREATE OR REPLACE FUNCTION chaos.log_not_before() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' OR NEW.not_before IS DISTINCT FROM OLD.not_before THEN
          INSERT INTO chaos.not_before_log (handoff_id, not_before, at) VALUES (NEW.id, NEW.not_before, NEW.updated_at);
        END IF;
        RETURN NULL;
      END $$;
      DROP TRIGGER IF EXISTS chaos_not_before ON public.handoffs;
      CREATE TRIGGER chaos_not_before AFTER INSERT OR UPDATE ON public.handoffs FOR EACH ROW EXECUTE FUNCTION chaos.log_not_before();
      CREATE TABLE IF NOT EXISTS chaos.commit_log (kind text NOT NULL, ref text NOT NULL, at timestamptz NOT NULL);
      CREATE OR REPLACE FUNCTION chaos.log_commit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO chaos.commit_log (kind, ref, at) VALUES (TG_ARGV[0], NEW.id::text, clock_timestamp());
        RETURN NULL;
      END $$;
      DROP TRIGGER IF EXISTS chaos_event_commit ON public.handoff_events;
      CREATE CONSTRAINT TRIGGER chaos_event_commit AFTER INSERT ON public.handoff_events DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION chaos.log_commit('event');
      DROP TRIGGER IF EXISTS chaos_attempt_commit ON public.delivery_attempts;
      CREATE CONSTRAINT TRIGGER chaos_attempt_commit AFTER INSERT ON public.delivery_attempts DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION chaos.log_commit('attempt');
    `);
  }

  private async addSlot(role: Role, name: string): Promise<void> {
    const postgresProxy = await FaultProxy.start({ targetPort: this.postgresPort });
    const redisProxy = await FaultProxy.start({ targetPort: this.redisPort });
    const apiUrl = role === 'api' ? `http://127.0.0.1:${await freePort()}` : null;
    this.slots.push({ role, name, postgresProxy, redisProxy, apiUrl, process: null, starts: 0, stopping: false });
  }

  /** Baton processes started so far: every start of every slot, and the demo host. */
  get processesStarted(): number {
    return this.slots.reduce((sum, s) => sum + s.starts, this.demoHost ? 1 : 0);
  }

  get apis(): ProcessSlot[] {
    return this.slots.filter((s) => s.role === 'api');
  }

  get workers(): ProcessSlot[] {
    return this.slots.filter((s) => s.role === 'worker');
  }

  private processEnv(slot: ProcessSlot): Record<string, string> {
    return {
      ...CHAOS_PROCESS_SETTINGS,
      DATABASE_URL: `postgresql://postgres@127.0.0.1:${slot.postgresProxy.port}/baton`,
      REDIS_URL: `redis://127.0.0.1:${slot.redisProxy.port}`,
      BATON_REDIS_PREFIX: 'chaos',
      BATON_HOME: this.home,
      BATON_DEMO_HOST_URL: this.demoHostUrl,
      // info: the start line a worker prints is what start() waits for; warnings are what a fault causes.
      BATON_LOG_LEVEL: 'info',
      ...(slot.apiUrl ? { BATON_API_PORT: new URL(slot.apiUrl).port } : {}),
    };
  }

  /**
   * Starts the slot's process; with `wait`, resolves once it serves (the API listens, the worker
   * consumes). Like a supervisor, the run restarts a process that exits by itself (a start that
   * failed while Postgres was down, a crash) after RESTART_DELAY_MS, and records the exit.
   */
  async start(slot: ProcessSlot, wait: boolean): Promise<void> {
    if (slot.process) return;
    const p = spawnBaton([slot.role], this.processEnv(slot));
    const serving = servingLine(slot.role);
    slot.process = p;
    slot.stopping = false;
    slot.starts++;
    this.logs.follow(slot.name, slot.starts, p.child);
    this.fates.set(p.pid, 'alive to the end');
    void p.exited().then(async (code) => {
      if (slot.process !== p) return;
      const output = p.output();
      // Not a fault of Baton's: the harness's port was taken. The next start gets another.
      const taken = portTaken(slot, output, serving);
      if (taken) slot.apiUrl = `http://127.0.0.1:${await freePort()}`;
      slot.process = null;
      if (slot.stopping || this.closing) return;
      this.fates.set(p.pid, 'exited by itself');
      this.unexpectedExits.push({
        slot: slot.name,
        at: Date.now(),
        code,
        signal: p.child.signalCode,
        wasServing: serving.test(output),
        reason: exitReason(output),
        ...(taken ? { portTaken: true } : {}),
      });
      setTimeout(() => {
        if (!this.closing && slot.process === null) void this.start(slot, false);
      }, RESTART_DELAY_MS);
    });
    if (wait) await this.untilServing(slot, p, serving);
  }

  /**
   * Whether the slot's process (this one, or the one started in its place after it exited)
   * serves within `timeoutMs`. A kill fault ends when the worker it killed is back: on a starved
   * machine a start takes seconds, and kills coming faster than starts would leave no worker.
   */
  async serving(slot: ProcessSlot, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && !this.closing) {
      if (slot.process && servingLine(slot.role).test(slot.process.output())) return true;
      await new Promise((r) => setTimeout(r, 100));
    }
    return false;
  }

  /** Waits for the slot's process to serve, through the restarts of a start that found its port taken (at most PORT_TRIES). */
  private async untilServing(slot: ProcessSlot, first: BatonProcess, serving: RegExp): Promise<void> {
    const deadline = Date.now() + 60_000;
    let p: BatonProcess | null = first;
    for (let tries = 1; ; tries++) {
      try {
        await p.waitFor(serving, Math.max(1, deadline - Date.now()));
        return;
      } catch (err) {
        if (!portTaken(slot, p.output(), serving) || tries >= PORT_TRIES) throw err;
      }
      const failed: BatonProcess = p;
      while ((p = slot.process) === null || p === failed) {
        if (Date.now() > deadline || this.closing) throw new Error(`${slot.name} did not start again after its port was taken`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  /** What became of the process an event's actor (`<host>-<pid>`) names. */
  fateOf(actor: string | null): ProcessFate {
    const pid = Number(/-(\d+)$/.exec(actor ?? '')?.[1]);
    return this.fates.get(pid) ?? 'unknown';
  }

  /** The first API writes the admin token on its first start; read it once that is done. */
  readAdminToken(): string {
    this.adminToken = readFileSync(join(this.home, 'admin.token'), 'utf8').trim();
    return this.adminToken;
  }

  /** SIGKILL: no shutdown, no hand-back; resolves once the process is gone. */
  async kill(slot: ProcessSlot): Promise<void> {
    const p = slot.process;
    if (!p) return;
    slot.stopping = true;
    this.killedOnPurpose++;
    this.fates.set(p.pid, 'sigkilled by the run');
    p.child.kill('SIGKILL');
    await p.exited();
  }

  /** Stops redis-server and starts it again on the same port, empty (it keeps nothing on disk). */
  async restartRedis(downMs: number): Promise<void> {
    await this.redis.stop();
    await new Promise((r) => setTimeout(r, downMs));
    this.redis = await startPrivateRedis({ port: this.redisPort });
  }

  /** Copies every process's whole output to `dir` (one file per slot); returns the files. */
  writeLogs(dir: string): Promise<string[]> {
    return this.logs.copyTo(dir);
  }

  /**
   * From now on an exiting process is not restarted (a Ctrl+C in the terminal reaches the
   * processes too, and they stop by themselves).
   */
  stopRestarting(): void {
    this.closing = true;
  }

  /** Stops everything this run started and deletes its temp directories; never throws. */
  async close(): Promise<void> {
    this.closing = true;
    for (const slot of this.slots) {
      slot.postgresProxy.resume();
      slot.redisProxy.resume();
    }
    // Teardown is best effort: each step runs whatever the one before did.
    await Promise.all(this.slots.flatMap((s) => (s.process ? [s.process.stop('SIGTERM', 5_000).catch(() => undefined)] : [])));
    await this.demoHost?.stop('SIGKILL').catch(() => undefined);
    await Promise.all(this.slots.flatMap((s) => [s.postgresProxy.close(), s.redisProxy.close()]));
    // Teardown is best effort, as above.
    await this.pool.end().catch(() => undefined);
    await this.redis.stop().catch(() => undefined);
    await this.postgres.stop().catch(() => undefined);
    this.logs.close();
    rmSync(this.home, { recursive: true, force: true });
  }

  /** For the logs of a failed run: where they would go unless removed. */
  describe(): string {
    return `home ${this.home}, Postgres ${this.postgres.url}, Redis redis://127.0.0.1:${this.redisPort}, demo host ${this.demoHostUrl}`;
  }
}

/** The line a process prints once it serves. */
function servingLine(role: Role): RegExp {
  return role === 'api' ? /Baton API on/ : /delivery worker started/;
}

/** Starts of one slot that may find the API's port taken before one serves. */
const PORT_TRIES = 3;

/** Whether an API process stopped at start-up because its port was taken. */
function portTaken(slot: ProcessSlot, output: string, serving: RegExp): boolean {
  return slot.role === 'api' && !serving.test(output) && /already in use|EADDRINUSE/.test(output);
}

/** The line of a process's last output that says why it stopped: an error line, or the last line. */
function exitReason(output: string): string {
  const lines = output.trim().split('\n').filter(Boolean);
  const error = lines.findLast((l) => /^(error|cannot start)/i.test(l) || /"level":(50|60)/.test(l));
  return (error ?? lines.at(-1) ?? '(no output)').slice(0, 300);
}
