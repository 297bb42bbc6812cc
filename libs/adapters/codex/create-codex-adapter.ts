import { stat } from 'node:fs/promises';
import type {
  DeliveryTarget,
  PrepareResult,
  ProviderAdapter,
  SendResult,
  TurnEnd,
  TurnObservation,
  TurnRequest,
  WatchHooks,
} from '../provider-adapter.ts';
import { endOfObservation } from '../provider-adapter.ts';
import { AppServerError, isSpawnError, type AppServerClient, type Notification } from './app-server-client.ts';
import { AppServerPool, DaemonEnvBusy } from './app-server-pool.ts';
import type { CodexErrorNotice } from './codex-errors.ts';
import { TOKEN_USAGE_METHOD, addTokenUsage, newTokenTally, turnUsage, withUsage, type TokenTally } from './codex-usage.ts';
import {
  CODEX_APPROVAL_POLICY,
  CODEX_DEFAULTS,
  codexEnvOf,
  codexHomeOf,
  parseCodexSettings,
  type CodexSettings,
} from './codex-settings.ts';
import { codexTurnText, endOf, observationOf, type CodexTurn } from './codex-turns.ts';
import { CodexHomePreparation } from './prepare-codex-home.ts';
import { isThreadId, ThreadBindings } from './thread-binding.ts';
import { busyReason, isClosing, isHeldElsewhere, isMissingThread, observeInThread } from './read-thread.ts';
import { THREAD_LOAD_CONFIG, ThreadHolds, type ReleaseHold } from './thread-holds.ts';
import { sleep } from '../sleep.ts';
import { CODEX_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

export { codexTurnText, markerLine } from './codex-turns.ts';

export interface CodexAdapterOptions {
  /** What `codex app-server daemon start` runs with, and so the daemon if this worker starts it (`codexInheritedEnv(process.env)`). */
  readonly baseEnv: Readonly<Record<string, string>>;
  /** How often a turn this worker did not start is looked at while followed (default 500 ms). */
  readonly pollMs?: number;
}

/** A turn this worker started and follows by the app-server's notifications. */
interface Followed {
  readonly requestId: string;
  readonly threadId: string;
  readonly turnId: string;
  readonly client: AppServerClient;
  running: boolean;
  end: TurnEnd | undefined;
  /** The connection to the daemon closed before the turn ended: only observation can tell what became of it. */
  orphaned: boolean;
  readonly agentTexts: string[];
  /** The turn's `error` notifications, for the failure's text and kind. */
  readonly notices: CodexErrorNotice[];
  /** The turn's tokens, summed over its `thread/tokenUsage/updated` notifications (each one model request's `last`). */
  readonly tokens: TokenTally;
  readonly model: string | undefined;
  /** Ends the turn's hold on its thread (thread-holds.ts). */
  readonly release: ReleaseHold;
  readonly wake: Set<() => void>;
}

const settingsOf = (target: DeliveryTarget) => parseCodexSettings(target.settings);
/** The notifications a followed turn is read from. */
const FOLLOWED_METHODS = new Set(['turn/started', 'item/completed', 'turn/completed', 'error', TOKEN_USAGE_METHOD]);
const errMessage = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Delivers turns into Codex threads through the Codex home's app-server daemon (`codex app-server
 * daemon start`; JSON-RPC on its Unix control socket), one per Codex home and shared by every
 * worker there: each worker keeps one connection per (binary, Codex home), starting the daemon
 * when none runs and reconnecting with back-off. The daemon, not the worker, runs the turns, so
 * a worker killed mid-turn leaves the turn running and the next worker observes it to its end;
 * and since every worker resumes threads in that one process, they share the agents' threads.
 *
 * - The thread is the agent's target when that is a thread id; otherwise (an agent registered
 *   without one) the thread Baton started for it, bound in the Codex home (thread-binding.ts).
 * - A write: resume the thread in the daemon, refuse (busy) when the thread is active there
 *   (whichever worker started its turn) or its last turn is unfinished on disk (`turn/start` on
 *   an active thread would STEER into the running turn), then `turn/start` with the marker line
 *   and the request id as the user message's clientId.
 * - `turn/started` is running; `turn/completed` ends it: completed = returned (the final agent
 *   message is the summary), failed = failed (its error, classified: codex-errors.ts),
 *   interrupted = interrupted.
 * - Baton holds a thread only while a write or a turn of its own is in it, then lets the daemon
 *   unload it (thread-holds.ts): between Baton's turns the thread is the user's to resume.
 * - Observation reads `thread/turns/list` (itemsView full, every page) for the request id: a
 *   complete read without it is evidence of absence.
 */
export function createCodexAdapter(options: CodexAdapterOptions): ProviderAdapter {
  const followed = new Map<string, Followed>();
  const byTurn = new Map<string, Followed>();
  const holds = new ThreadHolds();
  const bindings = new ThreadBindings();
  const pollMs = options.pollMs ?? CODEX_ADAPTER_DEFAULTS.pollMs;

  /** This worker followed the turn to its end. */
  const endedHere = (turnId: string) => byTurn.get(turnId)?.end !== undefined;
  const wake = (f: Followed) => {
    for (const w of [...f.wake]) w();
  };
  /**
   * Notifications of turns nobody follows yet, kept while a `turn/start` awaits its answer: the
   * daemon may send the answer and the turn's first notifications in one read, and they are
   * handled before `sendTurn` learns the turn id. Replayed once it does; dropped when no start is
   * pending.
   */
  let startsPending = 0;
  let early: Notification[] = [];
  const turnIdOf = (params: Record<string, unknown>) => (params['turn'] as CodexTurn | undefined)?.id ?? String(params['turnId'] ?? '');
  const onNotification = (client: AppServerClient, n: Notification) => {
    const { method, params } = n;
    if (method === 'thread/closed') return holds.closed(client, String(params['threadId'] ?? ''));
    const turn = params['turn'] as CodexTurn | undefined;
    const f = byTurn.get(turnIdOf(params));
    if (!f) {
      if (startsPending > 0 && FOLLOWED_METHODS.has(method) && early.length < 1_000) early.push(n);
      return;
    }
    if (method === 'turn/started') {
      f.running = true;
    } else if (method === 'item/completed') {
      const item = params['item'] as { type?: string; text?: string } | undefined;
      if (item?.type === 'agentMessage' && typeof item.text === 'string') f.agentTexts.push(item.text);
      return;
    } else if (method === 'error') {
      if (f.notices.length < 100) f.notices.push(params as unknown as CodexErrorNotice);
      return;
    } else if (method === TOKEN_USAGE_METHOD) {
      addTokenUsage(f.tokens, params);
      return;
    } else if (method === 'turn/completed' && turn) {
      f.end = withUsage(endOf(turn, f.threadId, f.agentTexts, f.notices), turnUsage(f.tokens, f.model)) ?? undefined;
      if (f.end) f.release();
    } else return;
    wake(f);
  };
  const pool = new AppServerPool(options.baseEnv, (_key, client) => {
    client.on('notification', (n: Notification) => onNotification(client, n));
    client.once('exit', () => {
      for (const f of followed.values()) {
        if (f.client !== client || f.end) continue;
        f.orphaned = true;
        wake(f);
      }
    });
  });
  const preparation = new CodexHomePreparation(pool, options.baseEnv);
  /** A connection to the daemon of the agent's Codex home: a write needs it running with the agent's `env`. */
  const daemonFor = (s: CodexSettings, needsEnv: boolean) =>
    pool.get({ binary: s.binary ?? CODEX_DEFAULTS.binary, codexHome: codexHomeOf(s, options.baseEnv), env: codexEnvOf(s), needsEnv });

  /** The agent's thread: its target, else the thread Baton bound to it, else null (none yet). */
  async function threadOf(target: DeliveryTarget, settings: CodexSettings): Promise<string | null> {
    if (isThreadId(target.target)) return target.target;
    return bindings.find(codexHomeOf(settings, options.baseEnv), target.agentId);
  }

  /** The model each thread was last started or resumed with, as the daemon answered (for the turns' usage). */
  const threadModels = new Map<string, string>();
  const noteModel = (threadId: string, answer: unknown) => {
    const model = (answer as { model?: unknown } | null)?.model;
    if (typeof model === 'string' && model !== '') threadModels.set(threadId, model);
  };

  const threadParams = (s: CodexSettings) => ({
    cwd: s.cwd,
    approvalPolicy: CODEX_APPROVAL_POLICY,
    ...(s.sandbox ? { sandbox: s.sandbox } : {}),
    ...(s.model ? { model: s.model } : {}),
    config: THREAD_LOAD_CONFIG,
  });

  async function sendTurn(target: DeliveryTarget, turn: TurnRequest, signal: AbortSignal): Promise<SendResult> {
    const parsed = settingsOf(target);
    if (!parsed.ok) return { outcome: 'rejected', reason: `the agent's codex settings are no longer valid: ${parsed.error}` };
    const s = parsed.settings;
    const isDir = await stat(s.cwd).then(
      (st) => st.isDirectory(),
      () => false,
    );
    if (!isDir) return { outcome: 'rejected', reason: `the working directory ${s.cwd} does not exist on this host` };
    const home = codexHomeOf(s, options.baseEnv);
    let client: AppServerClient;
    try {
      // A first daemon start that would copy the Codex package never runs inside the write's deadline.
      const preparing = await preparation.beforeWrite(s, home);
      if (preparing) return { outcome: 'busy', detail: preparing, retryAfterMs: 5_000 };
      client = await daemonFor(s, true);
    } catch (err) {
      if (isSpawnError(err)) return { outcome: 'rejected', reason: `cannot run ${s.binary ?? CODEX_DEFAULTS.binary}: ${err.code}` };
      if (err instanceof DaemonEnvBusy) return { outcome: 'busy', detail: err.message };
      return { outcome: 'not_sent', error: errMessage(err) };
    }
    // The thread is held for this write; a turn it starts takes the hold over (released when the turn ends).
    let release: ReleaseHold | undefined;
    let kept = false;
    try {
      // Everything up to turn/start writes no turn: a failure there is not_sent (safe to retry).
      let threadId: string;
      try {
        let known = await threadOf(target, s);
        if (known === null) {
          const started = (await client.call('thread/start', threadParams(s), signal)) as { thread?: { id?: string } };
          const id = started.thread?.id;
          if (!isThreadId(id ?? null)) return { outcome: 'not_sent', error: 'thread/start returned no thread id' };
          noteModel(id!, started);
          const adopted = holds.adopt(client, id!);
          known = await bindings.bind(home, target.agentId, id!);
          // Another worker bound its thread first: let go of ours and use that one.
          if (known === id) release = adopted;
          else adopted();
        }
        threadId = known;
        release ??= await holds.take(client, threadId, async () => {
          noteModel(threadId, await client.call('thread/resume', { threadId, excludeTurns: true, ...threadParams(s) }, signal));
        });
        const busy = await busyReason(client, threadId, s, endedHere, signal);
        if (busy) return { outcome: 'busy', detail: busy };
      } catch (err) {
        if (isHeldElsewhere(err)) return { outcome: 'busy', detail: `another process is writing the Codex thread (${errMessage(err)})` };
        if (isClosing(err)) return { outcome: 'busy', detail: `the Codex daemon is still unloading the thread (${errMessage(err)})` };
        if (isMissingThread(err)) return { outcome: 'gone', reason: `the Codex thread ${target.target ?? ''} does not exist in ${home}` };
        if (err instanceof AppServerError) return { outcome: 'rejected', reason: err.message };
        return { outcome: 'not_sent', error: errMessage(err) };
      }
      if (signal.aborted) return { outcome: 'not_sent', error: 'the write was cut off before turn/start' };
      startsPending++;
      try {
        const res = (await client.call(
          'turn/start',
          {
            threadId,
            clientUserMessageId: turn.requestId,
            input: [{ type: 'text', text: codexTurnText(turn), text_elements: [] }],
            approvalPolicy: CODEX_APPROVAL_POLICY,
            ...(s.model ? { model: s.model } : {}),
          },
          signal,
        )) as { turn?: CodexTurn };
        const turnId = res.turn?.id;
        if (!turnId) return { outcome: 'lost', error: 'turn/start answered without a turn id' };
        kept = true;
        const f: Followed = {
          requestId: turn.requestId,
          threadId,
          turnId,
          client,
          running: false,
          end: undefined,
          orphaned: false,
          agentTexts: [],
          notices: [],
          tokens: newTokenTally(),
          model: s.model ?? threadModels.get(threadId),
          release,
          wake: new Set(),
        };
        followed.set(turn.requestId, f);
        byTurn.set(turnId, f);
        for (const n of early.filter((e) => turnIdOf(e.params) === turnId)) onNotification(client, n);
        return { outcome: 'accepted' };
      } catch (err) {
        if (isMissingThread(err)) return { outcome: 'gone', reason: errMessage(err) };
        if (err instanceof AppServerError) return { outcome: 'rejected', reason: err.message };
        // Sent, and no answer: the connection closed or the deadline passed. It may have landed;
        // letting go of the thread does not stop a turn running in it.
        return { outcome: 'lost', error: errMessage(err) };
      } finally {
        if (--startsPending === 0) early = [];
      }
    } finally {
      if (!kept) release?.();
    }
  }

  async function observeTurn(target: DeliveryTarget, requestId: string, signal: AbortSignal): Promise<TurnObservation> {
    const f = followed.get(requestId);
    if (f?.end) return observationOf(f.end);
    if (f && !f.orphaned && f.client.alive) return { found: true, status: f.running ? 'running' : 'accepted' };
    const parsed = settingsOf(target);
    if (!parsed.ok) throw new Error(`the agent's codex settings are no longer valid: ${parsed.error}`);
    const s = parsed.settings;
    const threadId = await threadOf(target, s);
    // No thread was ever started for this agent: no turn can carry the request id.
    if (threadId === null) return { found: false, complete: true };
    const client = await daemonFor(s, false);
    return observeInThread(client, threadId, requestId, s, !isThreadId(target.target), signal);
  }

  async function isBusy(target: DeliveryTarget, signal: AbortSignal): Promise<boolean> {
    const parsed = settingsOf(target);
    if (!parsed.ok) return false;
    const s = parsed.settings;
    const threadId = await threadOf(target, s);
    if (threadId === null) return false;
    const client = await daemonFor(s, false);
    return (await busyReason(client, threadId, s, endedHere, signal)) !== null;
  }

  async function waitForTurn(target: DeliveryTarget, requestId: string, hooks: WatchHooks, signal: AbortSignal): Promise<TurnEnd> {
    let announced = false;
    const running = async () => {
      if (announced) return;
      announced = true;
      await hooks.onRunning();
    };
    let failures = 0;
    let absent = 0;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const f = followed.get(requestId);
      if (f && !f.orphaned) {
        // Ours, on a live connection: its notifications say when it runs and how it ends.
        if (f.running || f.end) await running();
        if (f.end) return finish(requestId, f.end);
        await new Promise<void>((resolve, reject) => {
          const done = () => {
            f.wake.delete(done);
            signal.removeEventListener('abort', onAbort);
            resolve();
          };
          const onAbort = () => {
            f.wake.delete(done);
            reject(signal.reason);
          };
          f.wake.add(done);
          signal.addEventListener('abort', onAbort, { once: true });
        });
        continue;
      }
      // Not ours (another worker's, or a killed one's), or our connection closed: follow it by reading the thread.
      try {
        const seen = await observeTurn(target, requestId, signal);
        failures = 0;
        if (seen.found) {
          absent = 0;
          if (seen.status !== 'accepted') await running();
          const end = endOfObservation(seen);
          if (end) return finish(requestId, end);
        } else if (++absent >= 3) {
          return { status: 'unobservable', error: `no turn of the Codex thread carries request id ${requestId}` };
        }
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        if (++failures >= 3) throw err instanceof Error ? err : new Error(String(err));
      }
      await sleep(pollMs, signal);
    }
  }

  /**
   * Forgets a followed turn. The thread was released when its turn ended; the end is reported
   * once the daemon has answered that release (at most 10 s), so whoever hears of the end (the
   * engine, then the user) finds the thread free.
   */
  async function finish(requestId: string, end: TurnEnd): Promise<TurnEnd> {
    const f = followed.get(requestId);
    if (f) {
      followed.delete(requestId);
      byTurn.delete(f.turnId);
      f.release();
      await holds.settled(f.client, f.threadId);
    }
    return end;
  }

  async function prepare(target: DeliveryTarget, _signal: AbortSignal): Promise<PrepareResult> {
    const parsed = settingsOf(target);
    if (!parsed.ok) return { ready: false, detail: `the agent's codex settings are not valid: ${parsed.error}` };
    return preparation.prepare(parsed.settings, codexHomeOf(parsed.settings, options.baseEnv));
  }

  return {
    provider: 'codex',
    // A failed turn's prompt stays in the thread: later turns are told what they replace.
    sessionKeepsPrompts: true,
    sendTurn,
    observeTurn,
    isBusy,
    waitForTurn,
    prepare,
    close: () => pool.close(),
  };
}
