import type { AppServerClient } from './app-server-client.ts';
import { CODEX_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

/**
 * Config Baton loads every thread with (`thread/start`, `thread/resume`). Codex keeps a thread
 * loaded in the daemon, and so holds its writer lock against every other process (`codex exec
 * resume`: "already has an active writer"), while any connection is subscribed to it and then
 * for `thread_unload_delay_secs` more (60 s by default in 0.171.0). With 0 it unloads the thread
 * as soon as the last subscriber leaves and its turn, if one runs, has ended.
 */
export const THREAD_LOAD_CONFIG = { thread_unload_delay_secs: 0 } as const;

/** Ends one use of a hold; calling it again does nothing. */
export type ReleaseHold = () => void;

interface Hold {
  /** This connection resumed (or started) the thread and has not unsubscribed since. */
  loaded: boolean;
  /** Writes in progress and turns of this worker running in the thread, through this connection. */
  users: number;
  /** The resume or unsubscribe in flight: the next one waits for it, so they reach the daemon in order. */
  chain: Promise<void>;
}

/**
 * Baton's holds on Codex threads, per connection to the daemon. A thread is loaded (resumed,
 * subscribed) only while Baton uses it: from a write until the write gave up, or until the turn it
 * started ended. When the last use ends, the connection unsubscribes at once and, loaded with
 * THREAD_LOAD_CONFIG, the daemon unloads the thread: its writer lock is free for the user's own
 * `codex exec resume` or TUI, and the next Baton write resumes it again (about 0.1-0.2 s). A
 * connection that closes (the worker stopped or was killed) loses its subscriptions with it, and
 * the daemon unloads the thread once a turn still running there ends: a hold never outlives the
 * turn it was taken for.
 */
export class ThreadHolds {
  private readonly byClient = new WeakMap<AppServerClient, Map<string, Hold>>();

  private holdOf(client: AppServerClient, threadId: string): Hold {
    let holds = this.byClient.get(client);
    if (!holds) this.byClient.set(client, (holds = new Map<string, Hold>()));
    let h = holds.get(threadId);
    if (!h) holds.set(threadId, (h = { loaded: false, users: 0, chain: Promise.resolve() }));
    return h;
  }

  /**
   * Takes the thread for one use: `resume` runs (in order with any release in flight) unless this
   * connection holds it already. @throws what `resume` throws (the use is then not taken).
   */
  async take(client: AppServerClient, threadId: string, resume: () => Promise<void>): Promise<ReleaseHold> {
    const h = this.holdOf(client, threadId);
    h.users++;
    const loading = h.chain.then(async () => {
      if (h.loaded) return;
      await resume();
      h.loaded = true;
    });
    // The chain only orders the loads; `loading` brings the error to this caller.
    h.chain = loading.catch(() => undefined);
    try {
      await loading;
    } catch (err) {
      h.users--;
      throw err;
    }
    return this.releaser(client, threadId, h);
  }

  /** A thread this connection just started (`thread/start` loads and subscribes it), taken for one use. */
  adopt(client: AppServerClient, threadId: string): ReleaseHold {
    const h = this.holdOf(client, threadId);
    h.users++;
    h.loaded = true;
    return this.releaser(client, threadId, h);
  }

  /** The daemon unloaded the thread (`thread/closed`): the next use resumes it. */
  closed(client: AppServerClient, threadId: string): void {
    const h = this.byClient.get(client)?.get(threadId);
    if (h) h.loaded = false;
  }

  /** Whether this connection holds the thread loaded now. */
  holds(client: AppServerClient, threadId: string): boolean {
    return this.byClient.get(client)?.get(threadId)?.loaded === true;
  }

  /** Resolves once this connection's release of the thread in flight, if any, has been answered. */
  settled(client: AppServerClient, threadId: string): Promise<void> {
    return this.byClient.get(client)?.get(threadId)?.chain ?? Promise.resolve();
  }

  private releaser(client: AppServerClient, threadId: string, h: Hold): ReleaseHold {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      h.users--;
      if (h.users > 0 || !h.loaded) return;
      h.loaded = false;
      h.chain = h.chain
        .then(async () => {
          // A use taken since waits on this chain and resumes after it.
          if (client.alive)
            await client.call('thread/unsubscribe', { threadId }, AbortSignal.timeout(CODEX_ADAPTER_DEFAULTS.unsubscribeTimeoutMs));
        })
        .catch(() => undefined)
        .then(() => {
          const holds = this.byClient.get(client);
          if (h.users === 0 && !h.loaded && holds?.get(threadId) === h) holds.delete(threadId);
        });
    };
  }
}
