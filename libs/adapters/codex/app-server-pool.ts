import { AppServerClient, AppServerUnavailable, isSpawnError } from './app-server-client.ts';
import { stopAppServerDaemon } from './app-server-daemon.ts';
import { daemonEnvServes, envFingerprint } from './daemon-env.ts';
import { CODEX_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

/**
 * The Codex home's daemon runs with another agent `env` than the write needs, and is in a turn:
 * it is restarted with this `env` only once idle (a restart would end the running turn). The write
 * is `busy`: nothing was written.
 */
export class DaemonEnvBusy extends Error {
  constructor(codexHome: string, active: readonly string[]) {
    super(
      `the app-server daemon of ${codexHome} runs with another env than this agent's (another agent's, or one started outside Baton) ` +
        `and is in a turn (thread ${active.join(', ')}); Baton restarts it with this agent's env once it is idle`,
    );
    this.name = 'DaemonEnvBusy';
  }
}

/** What a call needs of a Codex home's daemon. */
export interface DaemonRequest {
  readonly binary: string;
  readonly codexHome: string;
  /** The agent's `env` setting (values in clear): the daemon gets it if this request starts it. */
  readonly env: Readonly<Record<string, string>>;
  /**
   * A write needs the daemon to run with exactly this `env` (an idle daemon with another is
   * restarted, a busy one answers DaemonEnvBusy); a read (busy question, observation) takes the
   * daemon as it is.
   */
  readonly needsEnv: boolean;
}

interface Entry {
  client?: AppServerClient;
  starting?: Promise<AppServerClient>;
  /** A restart for another `env` in progress: the next one waits for it. */
  switching: Promise<unknown>;
  /** Set while Baton itself stops the daemon: that close is no failure and earns no back-off. */
  restarting: boolean;
  failures: number;
  notBefore: number;
}

/**
 * A worker's connections to the app-server daemons: one per (binary, Codex home), made on first
 * use (starting the daemon if it is not running), replaced when it closes. A connect that fails,
 * or a connection that closes, delays the next attempt (250 ms, doubling up to 30 s; reset by
 * one that succeeds), so a broken binary or home is not retried in a loop. `onStarted` lets the
 * adapter listen to a new connection and hand the turns it followed on a lost one to observation.
 *
 * One daemon serves a Codex home, and keeps the environment it was started with. A write whose
 * agent `env` differs from the daemon's (daemon-env.ts) restarts the daemon with it when no thread
 * there is in a turn, and is refused with DaemonEnvBusy while one is: a running turn is never
 * cut. Agents that share a Codex home should therefore share one `env`; with different ones, each
 * switch from one agent's to the other's costs a restart (about 1 s) and waits for the running
 * turn to end.
 */
export class AppServerPool {
  private readonly entries = new Map<string, Entry>();
  private closed = false;

  constructor(
    private readonly baseEnv: Readonly<Record<string, string>>,
    private readonly onStarted: (key: string, client: AppServerClient) => void,
  ) {}

  static key(binary: string, codexHome: string): string {
    return `${binary}\u0000${codexHome}`;
  }

  /**
   * A live connection to this home's daemon, running with the request's `env` when it asks for it.
   * @throws AppServerUnavailable while it cannot be reached, the spawn error of a missing binary,
   *   or DaemonEnvBusy (a write's `env` differs from a daemon in a turn)
   */
  async get(req: DaemonRequest): Promise<AppServerClient> {
    const entry = this.entryOf(req);
    const client = await this.connect(entry, req);
    if (!req.needsEnv || daemonEnvServes(client.daemon?.envFingerprint ?? null, envFingerprint(req.env))) return client;
    // One restart at a time per home in this process; the next request finds the new daemon.
    const switched = entry.switching.then(() => this.switchEnv(entry, req));
    // The chain only orders the restarts; `switched` brings the error to this caller.
    entry.switching = switched.catch(() => undefined);
    return switched;
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.entries.values()].flatMap((e) => (e.client ? [e.client.close()] : [])));
  }

  private entryOf(req: DaemonRequest): Entry {
    if (this.closed) throw new AppServerUnavailable('the Codex adapter is closed');
    const key = AppServerPool.key(req.binary, req.codexHome);
    let e = this.entries.get(key);
    if (!e) this.entries.set(key, (e = { switching: Promise.resolve(), restarting: false, failures: 0, notBefore: 0 }));
    return e;
  }

  private async switchEnv(entry: Entry, req: DaemonRequest): Promise<AppServerClient> {
    const client = await this.connect(entry, req);
    if (daemonEnvServes(client.daemon?.envFingerprint ?? null, envFingerprint(req.env))) return client;
    const signal = AbortSignal.timeout(CODEX_ADAPTER_DEFAULTS.envSwitchTimeoutMs);
    const active = await activeThreads(client, signal);
    if (active.length > 0) throw new DaemonEnvBusy(req.codexHome, active);
    entry.restarting = true;
    try {
      const gone = new Promise<void>((resolve) => (client.alive ? client.once('exit', () => resolve()) : resolve()));
      await stopAppServerDaemon({ binary: req.binary, codexHome: req.codexHome, env: this.baseEnv }, signal);
      await Promise.race([gone, new Promise<void>((resolve) => setTimeout(resolve, CODEX_ADAPTER_DEFAULTS.daemonExitWaitMs).unref())]);
      // The daemon was just stopped: a close that fails has nothing left to close.
      await client.close().catch(() => undefined);
    } finally {
      entry.restarting = false;
      entry.failures = 0;
      entry.notBefore = 0;
    }
    if (entry.client === client) entry.client = undefined;
    const fresh = await this.connect(entry, req);
    if (!daemonEnvServes(fresh.daemon?.envFingerprint ?? null, envFingerprint(req.env))) {
      throw new AppServerUnavailable(
        `the app-server daemon of ${req.codexHome} was restarted by another process with another env; trying again later`,
      );
    }
    return fresh;
  }

  private connect(entry: Entry, req: DaemonRequest): Promise<AppServerClient> {
    if (entry.client?.alive) return Promise.resolve(entry.client);
    if (entry.starting) return entry.starting;
    const wait = entry.notBefore - Date.now();
    if (wait > 0)
      return Promise.reject(
        new AppServerUnavailable(`the codex app-server daemon of ${req.codexHome} is unreachable (next attempt in ${wait} ms)`),
      );
    const client = new AppServerClient({ binary: req.binary, codexHome: req.codexHome, env: this.baseEnv, agentEnv: req.env });
    const backOff = () => {
      entry.failures++;
      entry.notBefore =
        Date.now() + Math.min(CODEX_ADAPTER_DEFAULTS.reconnectMaxMs, CODEX_ADAPTER_DEFAULTS.reconnectFirstMs * 2 ** (entry.failures - 1));
    };
    entry.starting = client
      .start()
      .then(() => {
        entry.failures = 0;
        entry.client = client;
        client.once('exit', () => {
          if (entry.client === client) entry.client = undefined;
          if (!entry.restarting) backOff();
        });
        this.onStarted(AppServerPool.key(req.binary, req.codexHome), client);
        return client;
      })
      .catch((err: unknown) => {
        backOff();
        // The connect error thrown below is what to report; closing the half-made client is best effort.
        void client.close().catch(() => undefined);
        throw err instanceof AppServerUnavailable || isSpawnError(err)
          ? err
          : new AppServerUnavailable(`could not reach the codex app-server daemon of ${req.codexHome}: ${(err as Error).message}`);
      })
      .finally(() => {
        entry.starting = undefined;
      });
    return entry.starting;
  }
}

/** The threads the daemon has loaded that are in a turn (any process's, any worker's). */
async function activeThreads(client: AppServerClient, signal: AbortSignal): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page = (await client.call('thread/loaded/list', cursor ? { cursor } : {}, signal)) as {
      data?: string[];
      nextCursor?: string | null;
    };
    ids.push(...(page.data ?? []));
    cursor = page.nextCursor ?? null;
  } while (cursor);
  const active: string[] = [];
  for (const threadId of ids) {
    const read = (await client.call('thread/read', { threadId }, signal)) as { thread?: { status?: { type?: string } } };
    if (read.thread?.status?.type === 'active') active.push(threadId);
  }
  return active;
}
