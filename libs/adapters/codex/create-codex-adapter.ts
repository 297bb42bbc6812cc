import { stat } from 'node:fs/promises';
import type { DeliveryTarget, ProviderAdapter, SendResult, TurnEnd, TurnObservation, TurnRequest, WatchHooks } from '../provider-adapter.ts';
import { earlierRequestsText, endOfObservation } from '../provider-adapter.ts';
import { AppServerError, AppServerPool, AppServerUnavailable, isSpawnError, type AppServerClient, type Notification } from './app-server-client.ts';
import { CODEX_APPROVAL_POLICY, CODEX_DEFAULTS, codexHomeOf, parseCodexSettings, type CodexSettings } from './codex-settings.ts';
import { isThreadId, ThreadBindings } from './thread-binding.ts';

export interface CodexAdapterOptions {
  /** What `codex app-server daemon start` runs with, and so the daemon if this worker starts it (`codexInheritedEnv(process.env)`). */
  readonly baseEnv: Readonly<Record<string, string>>;
  /** How often a turn this worker did not start is looked at while followed (default 500 ms). */
  readonly pollMs?: number;
}

/** The marker line every Baton turn carries; observation finds the turn by it (or by the user message's clientId). */
export const markerLine = (requestId: string): string => `baton-request-id: ${requestId}`;

export function codexTurnText(turn: TurnRequest): string {
  return `${earlierRequestsText(turn)}${turn.message}\n\n${turn.packet}\n\n${markerLine(turn.requestId)}\n`;
}

/** A Codex turn as `thread/turns/list` (itemsView full) and `turn/completed` give it. */
interface CodexTurn {
  readonly id: string;
  readonly status: 'completed' | 'interrupted' | 'failed' | 'inProgress';
  readonly items?: ReadonlyArray<{ type: string; text?: string; clientId?: string | null; content?: ReadonlyArray<{ type: string; text?: string }> }>;
  readonly error?: { message?: string } | null;
  readonly startedAt?: number | null;
  readonly completedAt?: number | null;
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
  readonly wake: Set<() => void>;
}

const settingsOf = (target: DeliveryTarget) => parseCodexSettings(target.settings);
/** The notifications a followed turn is read from. */
const FOLLOWED_METHODS = new Set(['turn/started', 'item/completed', 'turn/completed']);
const errMessage = (err: unknown) => (err instanceof Error ? err.message : String(err));
const isMissingThread = (err: unknown) => err instanceof AppServerError && /no rollout found|thread not found|thread not loaded/i.test(err.message);
/**
 * Codex lets one process write a thread: while a process other than the daemon has it loaded (a
 * user's own Codex TUI, `codex exec` mid-turn) thread/resume fails so. That is busy. Workers do
 * not collide here: they all reach the thread through the same daemon.
 */
const isHeldElsewhere = (err: unknown) => err instanceof AppServerError && /active writer/i.test(err.message);
/** A thread started but never given a turn: Codex has no history to list for it yet. */
const isUnmaterialized = (err: unknown) => err instanceof AppServerError && /not materialized yet/i.test(err.message);

function summaryOf(turn: CodexTurn, extra: readonly string[] = []): string {
  const texts = (turn.items ?? []).filter((i) => i.type === 'agentMessage' && typeof i.text === 'string').map((i) => i.text as string);
  return texts[texts.length - 1] ?? extra[extra.length - 1] ?? '';
}

function carriesRequest(turn: CodexTurn, requestId: string): boolean {
  const marker = markerLine(requestId);
  return (turn.items ?? []).some(
    (i) => i.type === 'userMessage' && (i.clientId === requestId || (i.content ?? []).some((c) => typeof c.text === 'string' && c.text.split('\n').some((l) => l.trim() === marker))),
  );
}

/** A turn this worker is not following, unfinished on disk: live for `unfinishedTurnMs` after its start. */
function unfinishedElsewhere(turn: CodexTurn, settings: CodexSettings, now: number): boolean {
  const unfinished = turn.status === 'inProgress' || (turn.status === 'interrupted' && (turn.completedAt ?? null) === null);
  const started = (turn.startedAt ?? 0) * 1000;
  return unfinished && now - started < (settings.unfinishedTurnMs ?? CODEX_DEFAULTS.unfinishedTurnMs);
}

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
 *   message is the summary), failed = failed (its error), interrupted = interrupted.
 * - Observation reads `thread/turns/list` (itemsView full, every page) for the request id: a
 *   complete read without it is evidence of absence.
 */
export function createCodexAdapter(options: CodexAdapterOptions): ProviderAdapter {
  const followed = new Map<string, Followed>();
  const byTurn = new Map<string, Followed>();
  /** Threads resumed through each connection (forgotten with the connection). */
  const loaded = new WeakMap<AppServerClient, Set<string>>();
  const bindings = new ThreadBindings();
  const pollMs = options.pollMs ?? 500;

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
  const onNotification = (n: Notification) => {
    const { method, params } = n;
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
    } else if (method === 'turn/completed' && turn) {
      f.end = endOf(turn, f.threadId, f.agentTexts) ?? undefined;
    } else return;
    wake(f);
  };
  const pool = new AppServerPool(options.baseEnv, (_key, client) => {
    loaded.set(client, new Set());
    client.on('notification', onNotification);
    client.once('exit', () => {
      for (const f of followed.values()) {
        if (f.client !== client || f.end) continue;
        f.orphaned = true;
        wake(f);
      }
    });
  });

  function endOf(turn: CodexTurn, threadId: string, extra: readonly string[] = []): TurnEnd | null {
    switch (turn.status) {
      case 'completed':
        return { status: 'returned', result: { summary: summaryOf(turn, extra), output: { threadId, turnId: turn.id } } };
      case 'failed':
        return { status: 'failed', error: turn.error?.message ?? 'the Codex turn failed' };
      case 'interrupted':
        return { status: 'interrupted', error: turn.error?.message ?? 'the Codex turn was interrupted' };
      case 'inProgress':
        return null;
      default:
        return null;
    }
  }

  /** The agent's thread: its target, else the thread Baton bound to it, else null (none yet). */
  async function threadOf(target: DeliveryTarget, settings: CodexSettings): Promise<string | null> {
    if (isThreadId(target.target)) return target.target;
    return bindings.find(codexHomeOf(settings, options.baseEnv), target.agentId);
  }

  const threadParams = (s: CodexSettings) => ({
    cwd: s.cwd,
    approvalPolicy: CODEX_APPROVAL_POLICY,
    ...(s.sandbox ? { sandbox: s.sandbox } : {}),
    ...(s.model ? { model: s.model } : {}),
  });

  async function ensureLoaded(client: AppServerClient, threadId: string, s: CodexSettings, signal: AbortSignal): Promise<void> {
    const set = loaded.get(client);
    if (set?.has(threadId)) return;
    await client.call('thread/resume', { threadId, excludeTurns: true, ...threadParams(s) }, signal);
    set?.add(threadId);
  }

  /** The newest turn on disk (any process's), or null for a thread without turns. */
  async function lastTurn(client: AppServerClient, threadId: string, signal: AbortSignal): Promise<CodexTurn | null> {
    try {
      const page = (await client.call('thread/turns/list', { threadId, sortDirection: 'desc', limit: 1, itemsView: 'notLoaded' }, signal)) as { data?: CodexTurn[] };
      return page.data?.[0] ?? null;
    } catch (err) {
      if (isUnmaterialized(err)) return null;
      throw err;
    }
  }

  /** Why the thread cannot take a turn now, or null when it is idle as far as Codex can tell. */
  async function busyReason(client: AppServerClient, threadId: string, s: CodexSettings, signal: AbortSignal): Promise<string | null> {
    // The daemon's status covers turns any worker started there ("notLoaded" when none loaded it).
    const read = (await client.call('thread/read', { threadId }, signal)) as { thread?: { status?: { type?: string; activeFlags?: string[] } } };
    const status = read.thread?.status;
    if (status?.type === 'active') return `the Codex thread is in a turn${status.activeFlags?.length ? ` (${status.activeFlags.join(', ')})` : ''}`;
    const last = await lastTurn(client, threadId, signal);
    const mine = last ? byTurn.get(last.id) : undefined;
    if (last && !(mine && mine.end) && unfinishedElsewhere(last, s, Date.now())) return `the Codex thread's last turn ${last.id} is unfinished (another process may be running it)`;
    return null;
  }

  async function sendTurn(target: DeliveryTarget, turn: TurnRequest, signal: AbortSignal): Promise<SendResult> {
    const parsed = settingsOf(target);
    if (!parsed.ok) return { outcome: 'rejected', reason: `the agent's codex settings are no longer valid: ${parsed.error}` };
    const s = parsed.settings;
    const isDir = await stat(s.cwd).then((st) => st.isDirectory(), () => false);
    if (!isDir) return { outcome: 'rejected', reason: `the working directory ${s.cwd} does not exist on this host` };
    const home = codexHomeOf(s, options.baseEnv);
    let client: AppServerClient;
    try {
      client = await pool.get(s.binary ?? CODEX_DEFAULTS.binary, home);
    } catch (err) {
      if (isSpawnError(err)) return { outcome: 'rejected', reason: `cannot run ${s.binary ?? CODEX_DEFAULTS.binary}: ${err.code}` };
      return { outcome: 'not_sent', error: errMessage(err) };
    }
    // Everything up to turn/start writes no turn: a failure there is not_sent (safe to retry).
    let threadId: string;
    try {
      let known = await threadOf(target, s);
      if (known === null) {
        const started = (await client.call('thread/start', threadParams(s), signal)) as { thread?: { id?: string } };
        const id = started.thread?.id;
        if (!isThreadId(id ?? null)) return { outcome: 'not_sent', error: 'thread/start returned no thread id' };
        known = await bindings.bind(home, target.agentId, id!);
        if (known === id) loaded.get(client)?.add(known);
      }
      threadId = known;
      await ensureLoaded(client, threadId, s, signal);
      const busy = await busyReason(client, threadId, s, signal);
      if (busy) return { outcome: 'busy', detail: busy };
    } catch (err) {
      if (isHeldElsewhere(err)) return { outcome: 'busy', detail: `another process is writing the Codex thread (${err instanceof Error ? err.message : ''})` };
      if (isMissingThread(err)) return { outcome: 'gone', reason: `the Codex thread ${target.target ?? ''} does not exist in ${home}` };
      if (err instanceof AppServerError) return { outcome: 'rejected', reason: err.message };
      return { outcome: 'not_sent', error: errMessage(err) };
    }
    if (signal.aborted) return { outcome: 'not_sent', error: 'the write was cut off before turn/start' };
    startsPending++;
    try {
      const res = (await client.call(
        'turn/start',
        { threadId, clientUserMessageId: turn.requestId, input: [{ type: 'text', text: codexTurnText(turn), text_elements: [] }], approvalPolicy: CODEX_APPROVAL_POLICY, ...(s.model ? { model: s.model } : {}) },
        signal,
      )) as { turn?: CodexTurn };
      const turnId = res.turn?.id;
      if (!turnId) return { outcome: 'lost', error: 'turn/start answered without a turn id' };
      const f: Followed = { requestId: turn.requestId, threadId, turnId, client, running: false, end: undefined, orphaned: false, agentTexts: [], wake: new Set() };
      followed.set(turn.requestId, f);
      byTurn.set(turnId, f);
      for (const n of early.filter((e) => turnIdOf(e.params) === turnId)) onNotification(n);
      return { outcome: 'accepted' };
    } catch (err) {
      if (isMissingThread(err)) return { outcome: 'gone', reason: err instanceof Error ? err.message : String(err) };
      if (err instanceof AppServerError) return { outcome: 'rejected', reason: err.message };
      // Sent, and no answer: the connection closed or the deadline passed. It may have landed.
      return { outcome: 'lost', error: errMessage(err) };
    } finally {
      if (--startsPending === 0) early = [];
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
    const client = await pool.get(s.binary ?? CODEX_DEFAULTS.binary, codexHomeOf(s, options.baseEnv));
    let cursor: string | null = null;
    try {
      do {
        const page = (await client.call('thread/turns/list', { threadId, sortDirection: 'asc', itemsView: 'full', limit: 50, ...(cursor ? { cursor } : {}) }, signal)) as {
          data?: CodexTurn[];
          nextCursor?: string | null;
        };
        for (const t of page.data ?? []) {
          if (!carriesRequest(t, requestId)) continue;
          if (unfinishedElsewhere(t, s, Date.now())) return { found: true, status: 'running' };
          const end = endOf(t, threadId);
          return end ? observationOf(end) : { found: true, status: 'running' };
        }
        cursor = page.nextCursor ?? null;
      } while (cursor);
    } catch (err) {
      // A bound thread that never got a turn, or vanished with its Codex home: nothing carries the id.
      if (isUnmaterialized(err) || (isMissingThread(err) && !isThreadId(target.target))) return { found: false, complete: true };
      throw err;
    }
    return { found: false, complete: true };
  }

  async function isBusy(target: DeliveryTarget, signal: AbortSignal): Promise<boolean> {
    const parsed = settingsOf(target);
    if (!parsed.ok) return false;
    const s = parsed.settings;
    const threadId = await threadOf(target, s);
    if (threadId === null) return false;
    const client = await pool.get(s.binary ?? CODEX_DEFAULTS.binary, codexHomeOf(s, options.baseEnv));
    return (await busyReason(client, threadId, s, signal)) !== null;
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

  function finish(requestId: string, end: TurnEnd): TurnEnd {
    const f = followed.get(requestId);
    if (f) {
      followed.delete(requestId);
      byTurn.delete(f.turnId);
    }
    return end;
  }

  return {
    provider: 'codex',
    sendTurn,
    observeTurn,
    isBusy,
    waitForTurn,
    close: () => pool.close(),
  };
}

function observationOf(end: TurnEnd): TurnObservation {
  switch (end.status) {
    case 'returned':
      return { found: true, status: 'returned', result: end.result };
    case 'failed':
      return { found: true, status: 'failed', error: end.error };
    case 'interrupted':
      return { found: true, status: 'interrupted', error: end.error };
    case 'busy':
      return { found: true, status: 'busy', error: end.detail };
    case 'rejected':
      return { found: true, status: 'rejected', error: end.reason };
    case 'unobservable':
      return { found: true, status: 'running' };
    default: {
      const never: never = end;
      throw new Error(`unexpected turn end: ${JSON.stringify(never)}`);
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
