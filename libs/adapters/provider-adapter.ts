/**
 * The contract every provider adapter implements (demo, command, webhook, Codex, Claude Code).
 * Adapters know nothing of Postgres, queues or locks: they write one turn, observe a turn by
 * its request id, and say whether a session is busy. Everything they return is data the use
 * cases in libs/handoffs turn into transitions.
 */

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
    };

/** How a watched turn ended, as far as Baton could see. */
export type TurnEnd =
  | { readonly status: 'returned'; readonly result: TurnResult }
  | { readonly status: 'failed'; readonly error: string }
  | { readonly status: 'interrupted'; readonly error: string }
  /** The recipient said, after the write, that it was busy and did nothing: resent later, no attempt budget spent. */
  | { readonly status: 'busy'; readonly detail: string }
  /** The recipient refused the turn after the write (nothing done): counted as a refusal. */
  | { readonly status: 'rejected'; readonly reason: string }
  | { readonly status: 'unobservable'; readonly error: string };

export interface WatchHooks {
  /** Called once when the turn is first seen running. */
  onRunning(): Promise<void>;
}

export interface ProviderAdapter {
  readonly provider: string;
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
  close(): Promise<void>;
}

/**
 * How an observed turn ended, or null while it has not (not found, accepted, running). One
 * mapping for the engine and every adapter that follows turns by observing them.
 */
export function endOfObservation(seen: TurnObservation): TurnEnd | null {
  if (!seen.found) return null;
  switch (seen.status) {
    case 'returned':
      return { status: 'returned', result: seen.result ?? { summary: '' } };
    case 'failed':
      return { status: 'failed', error: seen.error ?? 'failed' };
    case 'interrupted':
      return { status: 'interrupted', error: seen.error ?? 'interrupted' };
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
