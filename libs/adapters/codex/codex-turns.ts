import type { TurnEnd, TurnObservation, TurnRequest } from '../provider-adapter.ts';
import { earlierRequestsText } from '../provider-adapter.ts';
import { classifyCodexError, type CodexErrorNotice, type CodexTurnError } from './codex-errors.ts';
import { CODEX_DEFAULTS, type CodexSettings } from './codex-settings.ts';

/** The marker line every Baton turn carries; observation finds the turn by it (or by the user message's clientId). */
export const markerLine = (requestId: string): string => `baton-request-id: ${requestId}`;

export function codexTurnText(turn: TurnRequest): string {
  return `${earlierRequestsText(turn)}${turn.message}\n\n${turn.packet}\n\n${markerLine(turn.requestId)}\n`;
}

/** A Codex turn as `thread/turns/list` (itemsView full) and `turn/completed` give it. */
export interface CodexTurn {
  readonly id: string;
  readonly status: 'completed' | 'interrupted' | 'failed' | 'inProgress';
  readonly items?: ReadonlyArray<{
    type: string;
    text?: string;
    clientId?: string | null;
    content?: ReadonlyArray<{ type: string; text?: string }>;
  }>;
  readonly error?: CodexTurnError | null;
  readonly startedAt?: number | null;
  readonly completedAt?: number | null;
}

function summaryOf(turn: CodexTurn, extra: readonly string[] = []): string {
  const texts = (turn.items ?? []).filter((i) => i.type === 'agentMessage' && typeof i.text === 'string').map((i) => i.text as string);
  return texts[texts.length - 1] ?? extra[extra.length - 1] ?? '';
}

export function carriesRequest(turn: CodexTurn, requestId: string): boolean {
  const marker = markerLine(requestId);
  return (turn.items ?? []).some(
    (i) =>
      i.type === 'userMessage' &&
      (i.clientId === requestId ||
        (i.content ?? []).some((c) => typeof c.text === 'string' && c.text.split('\n').some((l) => l.trim() === marker))),
  );
}

/** A turn this worker is not following, unfinished on disk: live for `unfinishedTurnMs` after its start. */
export function unfinishedElsewhere(turn: CodexTurn, settings: CodexSettings, now: number): boolean {
  const unfinished = turn.status === 'inProgress' || (turn.status === 'interrupted' && (turn.completedAt ?? null) === null);
  const started = (turn.startedAt ?? 0) * 1000;
  return unfinished && now - started < (settings.unfinishedTurnMs ?? CODEX_DEFAULTS.unfinishedTurnMs);
}

/**
 * How a Codex turn ended, or null while it runs. `agentTexts` are the agent messages seen in
 * notifications (`turn/completed` carries only a summary view); `notices` the turn's `error`
 * notifications (a followed turn's; an observed one has only its stored error).
 */
export function endOf(
  turn: CodexTurn,
  threadId: string,
  agentTexts: readonly string[] = [],
  notices: readonly CodexErrorNotice[] = [],
): TurnEnd | null {
  switch (turn.status) {
    case 'completed':
      return { status: 'returned', result: { summary: summaryOf(turn, agentTexts), output: { threadId, turnId: turn.id } } };
    case 'failed': {
      const { error, failure } = classifyCodexError(turn.error, notices);
      return { status: 'failed', error, failure };
    }
    case 'interrupted':
      return { status: 'interrupted', error: turn.error?.message ?? 'the Codex turn was interrupted' };
    case 'inProgress':
      return null;
    default:
      return null;
  }
}

export function observationOf(end: TurnEnd): TurnObservation {
  const usage = 'usage' in end && end.usage ? { usage: end.usage } : {};
  switch (end.status) {
    case 'returned':
      return { found: true, status: 'returned', result: end.result, ...usage };
    case 'failed':
      return { found: true, status: 'failed', error: end.error, ...(end.failure ? { failure: end.failure } : {}), ...usage };
    case 'interrupted':
      return { found: true, status: 'interrupted', error: end.error, ...usage };
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
