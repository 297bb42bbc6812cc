import type { TurnObservation } from '../provider-adapter.ts';
import { AppServerError, type AppServerClient } from './app-server-client.ts';
import type { CodexSettings } from './codex-settings.ts';
import { carriesRequest, endOf, observationOf, unfinishedElsewhere, type CodexTurn } from './codex-turns.ts';

export const isMissingThread = (err: unknown) =>
  err instanceof AppServerError && /no rollout found|thread not found|thread not loaded/i.test(err.message);
/**
 * Codex lets one process write a thread: while a process other than the daemon has it loaded (a
 * user's own Codex TUI, `codex exec` mid-turn) thread/resume fails so. That is busy. Workers do
 * not collide here: they all reach the thread through the same daemon.
 */
export const isHeldElsewhere = (err: unknown) => err instanceof AppServerError && /active writer/i.test(err.message);
/**
 * The daemon is unloading the thread (Baton unsubscribes when none of its turns runs there, so
 * `codex exec resume` works between handoffs): thread/resume fails so until the unload is done.
 * Nothing was written: busy, asked again after the back-off.
 */
export const isClosing = (err: unknown) => err instanceof AppServerError && /is closing/i.test(err.message);
/** A thread started but never given a turn: Codex has no history to list for it yet. */
export const isUnmaterialized = (err: unknown) => err instanceof AppServerError && /not materialized yet/i.test(err.message);

/** The newest turn on disk (any process's), or null for a thread without turns. */
async function lastTurn(client: AppServerClient, threadId: string, signal: AbortSignal): Promise<CodexTurn | null> {
  try {
    const page = (await client.call(
      'thread/turns/list',
      { threadId, sortDirection: 'desc', limit: 1, itemsView: 'notLoaded' },
      signal,
    )) as { data?: CodexTurn[] };
    return page.data?.[0] ?? null;
  } catch (err) {
    if (isUnmaterialized(err)) return null;
    throw err;
  }
}

/**
 * Why the thread cannot take a turn now, or null when it is idle as far as Codex can tell.
 * `endedHere(turnId)`: this worker followed that turn to its end (its stored turn may lag).
 */
export async function busyReason(
  client: AppServerClient,
  threadId: string,
  s: CodexSettings,
  endedHere: (turnId: string) => boolean,
  signal: AbortSignal,
): Promise<string | null> {
  // The daemon's status covers turns any worker started there ("notLoaded" when none loaded it).
  const read = (await client.call('thread/read', { threadId }, signal)) as {
    thread?: { status?: { type?: string; activeFlags?: string[] } };
  };
  const status = read.thread?.status;
  if (status?.type === 'active')
    return `the Codex thread is in a turn${status.activeFlags?.length ? ` (${status.activeFlags.join(', ')})` : ''}`;
  const last = await lastTurn(client, threadId, signal);
  if (last && !endedHere(last.id) && unfinishedElsewhere(last, s, Date.now()))
    return `the Codex thread's last turn ${last.id} is unfinished (another process may be running it)`;
  return null;
}

/**
 * The turn of the thread that carries the request id, read from `thread/turns/list` (itemsView
 * full, every page): a complete read without it is evidence of absence. `bound`: Baton started
 * the thread (it is not the agent's target), so a missing thread means no turn carries the id.
 */
export async function observeInThread(
  client: AppServerClient,
  threadId: string,
  requestId: string,
  s: CodexSettings,
  bound: boolean,
  signal: AbortSignal,
): Promise<TurnObservation> {
  let cursor: string | null = null;
  try {
    do {
      const page = (await client.call(
        'thread/turns/list',
        { threadId, sortDirection: 'asc', itemsView: 'full', limit: 50, ...(cursor ? { cursor } : {}) },
        signal,
      )) as {
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
    if (isUnmaterialized(err) || (isMissingThread(err) && bound)) return { found: false, complete: true };
    throw err;
  }
  return { found: false, complete: true };
}
