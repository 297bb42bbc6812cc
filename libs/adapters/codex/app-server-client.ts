import { EventEmitter } from 'node:events';
import { ensureAppServerDaemon, type RunningDaemon } from './app-server-daemon.ts';
import { ControlSocket } from './control-socket.ts';
import { CODEX_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

/** A JSON-RPC error the app-server answered with (e.g. -32600 "thread not found: …"). */
export class AppServerError extends Error {
  constructor(
    readonly method: string,
    readonly code: number,
    message: string,
  ) {
    super(`${method}: ${message}`);
    this.name = 'AppServerError';
  }
}

/** The app-server could not be asked: it is not running, exited, or did not answer in time. */
export class AppServerUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AppServerUnavailable';
  }
}

export interface Notification {
  readonly method: string;
  readonly params: Record<string, unknown>;
}

export interface AppServerOptions {
  readonly binary: string;
  readonly codexHome: string;
  readonly env: Readonly<Record<string, string>>;
  /** The agent's `env` setting, given to the daemon if this connection starts it. */
  readonly agentEnv?: Readonly<Record<string, string>>;
  /** How long starting the daemon (if needed), connecting and initialize may take. */
  readonly startTimeoutMs?: number;
}

/**
 * One connection to the Codex home's app-server daemon (`codex app-server daemon start`, one per
 * Codex home, shared by every worker of that host): JSON-RPC, one message per WebSocket text
 * frame on the daemon's Unix control socket (control-socket.ts). `start()` makes sure the daemon
 * runs (app-server-daemon.ts), connects and does the `initialize` / `initialized` handshake;
 * `call()` sends a request and resolves with its result; notifications are emitted as
 * 'notification'; 'exit' fires once when the connection is gone (every pending call then rejects
 * with AppServerUnavailable). The daemon owns the threads and their running turns: closing the
 * connection, or the worker dying, ends neither, so `close()` only disconnects.
 */
export class AppServerClient extends EventEmitter {
  private socket: ControlSocket | undefined;
  private nextId = 0;
  private readonly pending = new Map<number, { method: string; resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private exited = false;
  private running: RunningDaemon | undefined;

  constructor(private readonly opts: AppServerOptions) {
    super();
  }

  /** The daemon this connection reached: its pid, the fingerprint of its agent `env`, its package. */
  get daemon(): RunningDaemon | undefined {
    return this.running;
  }

  get alive(): boolean {
    return this.socket !== undefined && !this.exited;
  }

  async start(): Promise<void> {
    const signal = AbortSignal.timeout(this.opts.startTimeoutMs ?? CODEX_ADAPTER_DEFAULTS.startTimeoutMs);
    const daemon = await ensureAppServerDaemon(this.opts, signal);
    this.running = daemon;
    // A connect error (ENOENT: the daemon went away after answering) is no spawn error: keep it
    // from reading as a missing binary.
    const socket = await ControlSocket.connect(daemon.socketPath, signal).catch((err: unknown) => {
      throw signal.aborted ? err : new AppServerUnavailable(`cannot connect to ${daemon.socketPath}: ${(err as Error).message}`);
    });
    this.socket = socket;
    socket.on('message', (line: string) => this.onLine(line));
    socket.once('close', () => {
      this.exited = true;
      const why = new AppServerUnavailable(`the connection to the codex app-server daemon of ${this.opts.codexHome} closed`);
      for (const p of this.pending.values()) p.reject(why);
      this.pending.clear();
      this.emit('exit', why);
    });
    await this.call(
      'initialize',
      { clientInfo: { name: 'baton', title: 'Baton', version: '1' }, capabilities: { experimentalApi: true } },
      signal,
    );
    this.write({ method: 'initialized' });
  }

  /** Sends one request. Rejects with AppServerError (its answer), AppServerUnavailable, or the signal's reason. */
  call(method: string, params: unknown, signal: AbortSignal): Promise<Record<string, unknown>> {
    if (!this.alive) return Promise.reject(new AppServerUnavailable('not connected to the codex app-server daemon'));
    if (signal.aborted) return Promise.reject(signal.reason);
    const id = ++this.nextId;
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      const onAbort = () => {
        this.pending.delete(id);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, {
        method,
        resolve: (v) => {
          signal.removeEventListener('abort', onAbort);
          resolve((v ?? {}) as Record<string, unknown>);
        },
        reject: (e) => {
          signal.removeEventListener('abort', onAbort);
          reject(e);
        },
      });
      this.write({ id, method, params });
    });
  }

  /** Disconnects from the daemon (its threads and running turns go on) and waits for the close. */
  async close(): Promise<void> {
    if (!this.socket || this.exited) return;
    await this.socket.close();
  }

  private write(message: unknown): void {
    if (this.socket && !this.exited) this.socket.send(JSON.stringify(message));
  }

  private onLine(line: string): void {
    let m: {
      id?: number | string;
      method?: string;
      params?: Record<string, unknown>;
      result?: unknown;
      error?: { code?: number; message?: string };
    };
    try {
      m = JSON.parse(line) as typeof m;
    } catch {
      return;
    }
    if (m.method !== undefined && m.id !== undefined) {
      // A request from the server (an approval, a question): with approval "never" none should
      // come; refuse it rather than leave the turn waiting on an answer nobody will give.
      this.write({ id: m.id, error: { code: -32601, message: 'Baton answers no requests from the app-server' } });
      return;
    }
    if (m.method !== undefined) {
      this.emit('notification', { method: m.method, params: m.params ?? {} } satisfies Notification);
      return;
    }
    if (typeof m.id !== 'number') return;
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (m.error) p.reject(new AppServerError(p.method, m.error.code ?? -1, m.error.message ?? 'error'));
    else p.resolve(m.result);
  }
}

/** A spawn that failed because the binary is missing or not executable (a configuration problem). */
export function isSpawnError(err: unknown): err is NodeJS.ErrnoException {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOENT' || code === 'EACCES' || code === 'ENOTDIR';
}
