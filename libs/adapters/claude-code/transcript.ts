import { createReadStream, promises as fs } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { readBounded } from '../command/run-record.ts';

/**
 * Claude Code's own record of a session: `<configDir>/projects/<project key>/<session>.jsonl`,
 * append-only JSON lines (`user`, `assistant` one line per content block, `attachment`,
 * `queue-operation`, `last-prompt`, ...). The project key is the absolute working directory with
 * every character other than a letter or digit replaced by '-' (verified for 2.1.197 with '/',
 * '.', '_' and spaces; very long paths were not checked).
 */
export function transcriptPath(configDir: string, cwd: string, sessionId: string): string {
  return join(configDir, 'projects', cwd.replace(/[^A-Za-z0-9]/g, '-'), `${sessionId}.jsonl`);
}

/** The marker line every Baton turn carries (the command provider's too). */
export function markerLine(requestId: string): string {
  return `baton-request-id: ${requestId}`;
}

/** What the transcript says about one request id. */
export type TranscriptFinding =
  /** `exists: false`: the session has no transcript at all (never created here). */
  | { readonly found: false; readonly exists: boolean }
  | {
      readonly found: true;
      /** How the turn's last assistant message reads (null: no answer yet). */
      readonly answer: TranscriptAnswer | null;
    };

export interface TranscriptAnswer {
  readonly text: string;
  /** claude's synthetic message for an API error (`isApiErrorMessage`). */
  readonly apiError: boolean;
  /** Its `error` (claude's name for the kind) and `apiErrorStatus`, when it is one. */
  readonly errorName?: string;
  readonly httpStatus?: number;
  readonly pendingTool: boolean;
}

interface Line {
  readonly type?: string;
  readonly isMeta?: boolean;
  readonly isSidechain?: boolean;
  readonly isCompactSummary?: boolean;
  readonly isVisibleInTranscriptOnly?: boolean;
  readonly isApiErrorMessage?: boolean;
  readonly error?: unknown;
  readonly apiErrorStatus?: unknown;
  readonly message?: { readonly role?: string; readonly content?: unknown };
}

function blocksOf(content: unknown): Array<{ type?: string; text?: string }> {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return Array.isArray(content) ? (content as Array<{ type?: string; text?: string }>) : [];
}

/** A user line that starts a turn (a prompt), as opposed to a tool result fed back to the model. */
function isPrompt(line: Line): boolean {
  if (line.type !== 'user' || line.isMeta === true) return false;
  const blocks = blocksOf(line.message?.content);
  return blocks.length > 0 && blocks.every((b) => b.type === 'text');
}

function textOf(line: Line): string {
  return blocksOf(line.message?.content)
    .filter((b) => b.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text as string)
    .join('\n');
}

function promptHasMarker(line: Line, marker: string): boolean {
  return blocksOf(line.message?.content).some((b) => typeof b.text === 'string' && b.text.split('\n').some((l) => l.trim() === marker));
}

/**
 * Reads the whole transcript once, line by line (a session's file grows with every turn), and
 * finds the prompt that carries `requestId`'s marker line and the last assistant message after
 * it, up to the next prompt. Only prompts count: the marker quoted by a model reply, a tool's
 * output or a later prompt is not the turn. Lines that are not JSON (a write in progress) are
 * skipped.
 * @throws when the file exists but cannot be read (the caller could not ask).
 */
export async function scanTranscript(path: string, requestId: string): Promise<TranscriptFinding> {
  try {
    await fs.access(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { found: false, exists: false };
    throw err;
  }
  const marker = markerLine(requestId);
  let inTurn = false;
  let found = false;
  let answer: TranscriptAnswer | null = null;
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  for await (const raw of lines) {
    // Cheap skip before the turn: its prompt line must contain the id.
    if (raw === '' || (!inTurn && !raw.includes(requestId))) continue;
    let line: Line;
    try {
      line = JSON.parse(raw) as Line;
    } catch {
      continue;
    }
    if (isPrompt(line)) {
      if (inTurn) break;
      if (promptHasMarker(line, marker)) {
        inTurn = found = true;
      }
      continue;
    }
    if (!inTurn || line.type !== 'assistant') continue;
    const text = textOf(line);
    const toolUse = blocksOf(line.message?.content).some((b) => b.type === 'tool_use');
    // One line per content block: a text block followed by a tool call is still a turn at work.
    if (text !== '') {
      const apiError = line.isApiErrorMessage === true;
      answer = {
        text,
        apiError,
        ...(apiError && typeof line.error === 'string' ? { errorName: line.error } : {}),
        ...(apiError && typeof line.apiErrorStatus === 'number' ? { httpStatus: line.apiErrorStatus } : {}),
        pendingTool: false,
      };
    }
    if (toolUse) answer = { text: answer?.text ?? '', apiError: false, pendingTool: true };
  }
  return found ? { found: true, answer } : { found: false, exists: true };
}

/** Where the newest turn of a session stands, as the end of its transcript shows it. */
export type TurnState =
  | { readonly open: false }
  | {
      readonly open: true;
      /** What is unanswered. */
      readonly waiting: 'an unanswered prompt' | 'a tool call without its result' | 'a tool result the model has not answered';
      /** The marker of the turn's prompt (a Baton turn's), when the read holds that prompt and it carries one. */
      readonly requestId: string | null;
    };

/**
 * User lines that no model answers: a person's slash command and its output, `!` shell mode,
 * a compaction summary. They neither start nor continue a turn.
 */
const NOT_A_TURN = /^\s*<(command-name|command-message|command-args|local-command-[a-z]+|bash-input|bash-stdout|bash-stderr)>/;
/** What claude writes when a person stops a turn (Esc): the turn is over. */
const INTERRUPTED = /^\s*\[Request interrupted by user/;
const MARKER = /^baton-request-id: (\S+)\s*$/gm;

function turnLine(line: Line): boolean {
  if ((line.type !== 'user' && line.type !== 'assistant') || line.isSidechain === true) return false;
  if (line.type === 'assistant') return true;
  if (line.isMeta === true || line.isCompactSummary === true || line.isVisibleInTranscriptOnly === true) return false;
  return !(isPrompt(line) && NOT_A_TURN.test(textOf(line)));
}

/**
 * Reads the last `maxBytes` of a transcript and says whether its newest turn is unfinished: its
 * last conversation line is a prompt (not an interruption), an assistant tool call, or a tool
 * result the model has not answered. An assistant text or an API error message ends a turn.
 * Lines cut by the read or being written are skipped. Null when the session has no transcript.
 * @throws when the file exists but cannot be read.
 */
export async function lastTurnState(path: string, maxBytes: number): Promise<TurnState | null> {
  let text: string;
  try {
    await fs.access(path);
    text = await readBounded(path, maxBytes);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const lines: Line[] = [];
  for (const raw of text.split('\n')) {
    if (!raw.startsWith('{')) continue;
    try {
      const line = JSON.parse(raw) as Line;
      if (turnLine(line)) lines.push(line);
    } catch {
      // The first line of a cut read, or the last one being written.
    }
  }
  const last = lines.at(-1);
  if (!last) return { open: false };
  let waiting: Extract<TurnState, { open: true }>['waiting'];
  if (last.type === 'assistant') {
    if (last.isApiErrorMessage === true || !blocksOf(last.message?.content).some((b) => b.type === 'tool_use')) return { open: false };
    waiting = 'a tool call without its result';
  } else if (isPrompt(last)) {
    if (INTERRUPTED.test(textOf(last))) return { open: false };
    waiting = 'an unanswered prompt';
  } else {
    waiting = 'a tool result the model has not answered';
  }
  const prompt = lines.findLast((l) => isPrompt(l));
  const requestId = prompt ? ([...textOf(prompt).matchAll(MARKER)].at(-1)?.[1] ?? null) : null;
  return { open: true, waiting, requestId };
}
