/**
 * The contract every provider adapter implements (demo, command, webhook, Codex, Claude Code).
 * Adapters know nothing of Postgres, queues or locks: they write one turn, observe a turn by
 * its request id, and say whether a session is busy. Everything they return is data the use
 * cases in libs/handoffs turn into transitions.
 */

import type { TurnFailure } from '../domain/turn-failure.ts';
import type { TurnUsage } from '../domain/turn-usage.ts';

export type { TurnUsage } from '../domain/turn-usage.ts';

/** Where a turn goes: the agent and the session/endpoint it had when the handoff was enrolled. */
export interface DeliveryTarget {
  readonly agentId: string;
  readonly handle: string;
  /** Session id, endpoint URL, or command name, depending on the provider. */
  readonly target: string | null;
  readonly settings: Readonly<Record<string, unknown>>;
}

/** One new turn. `requestId` is fresh for every attempt and must travel with the turn. */
export interface TurnRequest {
  readonly requestId: string;
  readonly handoffId: string;
  /**
   * How many times the recipient has been handed this handoff to act on, this turn included: 1
   * on the first; each earlier write it took (ran, failed, was interrupted or refused, or whose
   * answer was lost) adds one. Writes answered busy and writes that never left Baton do not
   * count. Not the attempt row's number, which counts every write (libs/adapters/README.md).
   */
  readonly attempt: number;
  readonly from: string;
  readonly title: string | null;
  readonly message: string;
  readonly focus: string | null;
  readonly doneWhen: string | null;
  readonly context: {
    readonly summary: string | null;
    readonly openQuestions: readonly string[];
    readonly nextSteps: readonly string[];
  };
  /**
   * The bounded context packet (handoff context and the session's newest facts), as text in
   * which everything agents wrote is fenced as data. Adapters put it in the turn.
   */
  readonly packet: string;
  /**
   * Earlier Baton requests whose prompts may still sit unanswered in this session (a model
   * error leaves its prompt in a Codex thread or Claude Code session): what this turn replaces,
   * and what Baton gave up on. Absent or empty for most turns. Text adapters put
   * `earlierRequestsText(turn)` before the message.
   */
  readonly earlier?: EarlierRequests;
}

/** An earlier request of another handoff whose prompt stayed in the session without an answer. */
export interface WithdrawnRequest {
  readonly requestId: string;
  readonly handoffId: string;
  readonly title: string | null;
  /** How its handoff ended (FAILED, CANCELLED) or why it waits, in a few words. */
  readonly reason: string;
}

export interface EarlierRequests {
  /** This handoff's own earlier attempts that reached the session and got no answer: this turn replaces them. */
  readonly replaces: readonly string[];
  /** Other handoffs' requests in this session that got no answer and that Baton gave up on: not to be acted on. */
  readonly withdrawn: readonly WithdrawnRequest[];
  /** Other handoffs' requests in this session that got no answer and that Baton will send again later: not to be acted on now. */
  readonly pending: readonly WithdrawnRequest[];
}

/**
 * The lines a turn's text starts with when earlier requests sit unanswered in the session, or ''
 * when none do. Every text adapter (command, Claude Code, Codex) puts them before the message, so
 * the model reads what to ignore before what to do.
 */
export function earlierRequestsText(turn: Pick<TurnRequest, 'earlier'>): string {
  const e = turn.earlier;
  if (!e || (e.replaces.length === 0 && e.withdrawn.length === 0 && e.pending.length === 0)) return '';
  const lines: string[] = [];
  if (e.replaces.length > 0) {
    const ids = e.replaces.map((id) => `baton-request-id ${id}`).join(', ');
    lines.push(
      `[Baton] This request replaces the earlier unanswered request${e.replaces.length > 1 ? 's' : ''} ${ids} of the same handoff (its turn ended in an error). ` +
        'Act on this request once; do not act on the earlier copies separately.',
    );
  }
  if (e.withdrawn.length > 0) {
    lines.push(
      '[Baton] Baton gave up on these earlier requests in this session. Their senders were told so: they are withdrawn, and must not be acted on:',
    );
    for (const w of e.withdrawn) {
      lines.push(`- baton-request-id ${w.requestId} (handoff ${w.handoffId}${w.title ? `, "${w.title}"` : ''}): ${w.reason}`);
    }
  }
  if (e.pending.length > 0) {
    lines.push(
      '[Baton] These earlier requests in this session got no answer; Baton will send each again later as a request of its own. Do not act on them now:',
    );
    for (const w of e.pending) {
      lines.push(`- baton-request-id ${w.requestId} (handoff ${w.handoffId}${w.title ? `, "${w.title}"` : ''}): ${w.reason}`);
    }
  }
  return `${lines.join('\n')}\n\n`;
}

/**
 * What happened to a write.
 * - accepted: the session took the turn.
 * - busy: the session is in a turn; nothing was written.
 * - rejected: the session refused the write.
 * - not_sent: the write provably never left (e.g. connection refused); safe to try again.
 * - gone: the session or endpoint no longer exists; nothing was written.
 * - lost: nobody knows whether it landed (timeout, reset after sending). Never resend blindly.
 */
export type SendResult =
  /** `seen`: the turn's state as the provider reported it with the acceptance (saves a look). */
  | { readonly outcome: 'accepted'; readonly seen?: TurnObservation }
  /** `retryAfterMs`: when the recipient asked to be tried again (a webhook's `Retry-After`), if it said. */
  | { readonly outcome: 'busy'; readonly detail?: string; readonly retryAfterMs?: number }
  | { readonly outcome: 'rejected'; readonly reason: string }
  | { readonly outcome: 'not_sent'; readonly error: string }
  | { readonly outcome: 'gone'; readonly reason: string }
  | { readonly outcome: 'lost'; readonly error: string };

export { FAILURE_KINDS, type FailureKind, type TurnFailure } from '../domain/turn-failure.ts';

export interface TurnResult {
  readonly summary: string;
  readonly output?: unknown;
}

/**
 * `busy` and `rejected` describe a turn that was started but did nothing: the recipient (a
 * command's documented exit code, a webhook's callback) answered "busy, nothing done" or "refused"
 * only after the write. Baton treats them as it treats the same answers to the write itself.
 */
export type ObservedStatus = 'accepted' | 'running' | 'returned' | 'failed' | 'interrupted' | 'busy' | 'rejected';

/**
 * A look into the session's history for one request id. `complete` says the whole history was
 * scanned, so `found: false` is evidence of absence (three such scans over an hour prove it).
 */
export type TurnObservation =
  | { readonly found: false; readonly complete: boolean }
  | {
      readonly found: true;
      readonly status: ObservedStatus;
      readonly result?: TurnResult;
      readonly error?: string;
      /** For `failed`: what kind of failure, when the provider could tell. */
      readonly failure?: TurnFailure;
      /** For an ended turn (returned, failed, interrupted): what the runtime reported it used, when it did. */
      readonly usage?: TurnUsage;
    };

/**
 * How a watched turn ended, as far as Baton could see. `usage`: what the runtime reported the
 * turn used (model, tokens, cost), when it did; stored with the attempt in the turn end's statement.
 */
export type TurnEnd =
  | { readonly status: 'returned'; readonly result: TurnResult; readonly usage?: TurnUsage }
  /** `failure`: what kind, when the runtime said (absent: transient). */
  | { readonly status: 'failed'; readonly error: string; readonly failure?: TurnFailure; readonly usage?: TurnUsage }
  | { readonly status: 'interrupted'; readonly error: string; readonly usage?: TurnUsage }
  /** The recipient said, after the write, that it was busy and did nothing: resent later, no attempt budget spent. */
  | { readonly status: 'busy'; readonly detail: string }
  /** The recipient refused the turn after the write (nothing done): counted as a refusal. */
  | { readonly status: 'rejected'; readonly reason: string }
  | { readonly status: 'unobservable'; readonly error: string };

/** What preparing an agent's runtime did (`ProviderAdapter.prepare`). */
export interface PrepareResult {
  /** The runtime is ready for a first turn without a slow start. */
  readonly ready: boolean;
  /** What was done, or why it could not be, in a few words (logged by the worker). */
  readonly detail: string;
}

export interface WatchHooks {
  /** Called once when the turn is first seen running. */
  onRunning(): Promise<void>;
}

export interface ProviderAdapter {
  readonly provider: string;
  /**
   * true when a turn's prompt stays in the recipient's session even when the turn fails (a Codex
   * thread, a Claude Code session): the engine then tells each turn which earlier Baton requests
   * in the session got no answer (`TurnRequest.earlier`), at the cost of one read per turn.
   */
  readonly sessionKeepsPrompts?: boolean;
  /**
   * true when `sendTurn` itself answers `busy` (atomically, nothing written) while the session
   * is in a turn; Baton then skips the separate `isBusy` question before each write.
   */
  readonly reportsBusyOnSend?: boolean;
  /** Writes exactly one turn. Never retries on its own. Resolves; throws only on programming errors. */
  sendTurn(target: DeliveryTarget, turn: TurnRequest, signal: AbortSignal): Promise<SendResult>;
  /** Scans the session's history for the request id. Throws when the provider cannot be asked. */
  observeTurn(target: DeliveryTarget, requestId: string, signal: AbortSignal): Promise<TurnObservation>;
  /** Whether the session is in a turn right now. Throws when the provider cannot be asked. */
  isBusy(target: DeliveryTarget, signal: AbortSignal): Promise<boolean>;
  /**
   * Follows an accepted turn until it ends. Rejects with the signal's reason when aborted
   * (shutdown, lost lock); the turn keeps running in the session and is observed again later.
   */
  waitForTurn(target: DeliveryTarget, requestId: string, hooks: WatchHooks, signal: AbortSignal): Promise<TurnEnd>;
  /**
   * Optional: readies the agent's runtime ahead of its first turn, so that no write pays a slow
   * first start inside its deadline (Codex: link the installed package into the Codex home and
   * start its daemon). The worker calls it at start for each agent it serves. Idempotent, writes no
   * turn, takes no turn lock, may take long (no deadline but the signal). Resolves with what it
   * did (`ready: false` when the agent's settings cannot be readied); throws when the runtime
   * could not be reached (the first write then tries again).
   */
  prepare?(target: DeliveryTarget, signal: AbortSignal): Promise<PrepareResult>;
  close(): Promise<void>;
}

/**
 * How an observed turn ended, or null while it has not (not found, accepted, running). One
 * mapping for the engine and every adapter that follows turns by observing them.
 */
export function endOfObservation(seen: TurnObservation): TurnEnd | null {
  if (!seen.found) return null;
  const usage = seen.usage ? { usage: seen.usage } : {};
  switch (seen.status) {
    case 'returned':
      return { status: 'returned', result: seen.result ?? { summary: '' }, ...usage };
    case 'failed':
      return { status: 'failed', error: seen.error ?? 'failed', ...(seen.failure ? { failure: seen.failure } : {}), ...usage };
    case 'interrupted':
      return { status: 'interrupted', error: seen.error ?? 'interrupted', ...usage };
    case 'busy':
      return { status: 'busy', detail: seen.error ?? 'the recipient was busy and did nothing' };
    case 'rejected':
      return { status: 'rejected', reason: seen.error ?? 'the recipient refused the turn' };
    case 'accepted':
    case 'running':
      return null;
    default: {
      const never: never = seen.status;
      throw new Error(`unexpected observed status: ${JSON.stringify(never)}`);
    }
  }
}
