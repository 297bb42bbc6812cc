import { join } from 'node:path';
import { readBounded, type RunView } from '../command/run-record.ts';
import type { SendResult, TurnObservation } from '../provider-adapter.ts';
import { claudeErrorText, claudeFailure, type ClaudeErrorReport } from './claude-failure.ts';
import { reportsUsage } from '../../domain/turn-usage.ts';
import { readStreamEnd, streamErrorReport, streamUsage } from './stream-end.ts';
import { scanTranscript } from './transcript.ts';

/** A binary or working directory that cannot be used never will be until the settings change. */
const CONFIG_SPAWN_ERRORS = new Set(['ENOENT', 'EACCES', 'ENOTDIR', 'EISDIR', 'ENOEXEC', 'EPERM', 'ELOOP', 'ENAMETOOLONG']);

/** A failed turn as claude reported it: its text and what kind of failure it was. */
function failedWith(report: ClaudeErrorReport): TurnObservation {
  return { found: true, status: 'failed', error: claudeErrorText(report), failure: claudeFailure(report) };
}

function withOutput(head: string, output: string): string {
  const text = output.trim();
  return text ? `${head}: ${text}` : head;
}

/** What the session's own history says, with the process state `alive` from the record. */
async function fromTranscript(path: string | null, requestId: string, alive: boolean): Promise<TurnObservation> {
  if (!path) throw new Error('cannot locate the transcript: neither configDir nor HOME is set');
  const seen = await scanTranscript(path, requestId);
  if (!seen.found) {
    // A process of Baton's that has not written the prompt yet is a turn under way.
    return alive ? { found: true, status: 'accepted' } : { found: false, complete: true };
  }
  if (alive) return { found: true, status: 'running' };
  const a = seen.answer;
  if (a && !a.pendingTool) {
    if (a.apiError)
      return failedWith({
        text: a.text,
        ...(a.errorName ? { errorName: a.errorName } : {}),
        ...(a.httpStatus ? { httpStatus: a.httpStatus } : {}),
      });
    return { found: true, status: 'returned', result: { summary: a.text, output: { source: 'transcript' } } };
  }
  return {
    found: true,
    status: 'interrupted',
    error: 'the claude process ended before the turn answered (its transcript has the prompt but no final answer)',
  };
}

/**
 * How a turn reads from its run record (the claude process, its stream-json result) and, where
 * the record cannot tell, from the session's transcript (`transcript`: its path, or null when
 * no config directory can be named).
 */
export async function observationOf(dir: string, view: RunView, transcript: string | null, requestId: string): Promise<TurnObservation> {
  switch (view.kind) {
    case 'absent':
      // Not started through this host's records (or the record was removed): the session's own history decides.
      return fromTranscript(transcript, requestId, false);
    case 'never_started':
      return { found: false, complete: true };
    case 'starting':
      return { found: true, status: 'accepted' };
    case 'running':
      return { found: true, status: 'running' };
    case 'ended':
      break;
  }
  const { exit, reservation } = view;
  const bytes = reservation.maxOutputBytes;
  if (exit.kind === 'spawn_failed') {
    return CONFIG_SPAWN_ERRORS.has(exit.code)
      ? { found: true, status: 'rejected', error: `cannot start ${reservation.argv[0] ?? 'claude'}: ${exit.message}` }
      : { found: false, complete: true };
  }
  const end = readStreamEnd(await readBounded(join(dir, 'stdout'), bytes));
  if (exit.kind === 'exited' && end) {
    const result = end.result;
    const usage = streamUsage(end);
    const used = reportsUsage(usage) ? { usage } : {};
    if (result.is_error) return { ...failedWith(streamErrorReport(end)), ...used };
    return {
      found: true,
      status: 'returned',
      ...used,
      result: {
        summary: result.result ?? '',
        output: {
          sessionId: result.session_id ?? null,
          numTurns: result.num_turns ?? null,
          durationMs: result.duration_ms ?? null,
          costUsd: result.total_cost_usd ?? null,
        },
      },
    };
  }
  // No result on the stream: killed (its deadline, or its supervisor died and the process
  // was stopped) or crashed. Whatever reached the session's transcript before that decides.
  const seen = await fromTranscript(transcript, requestId, false);
  if (seen.found && seen.status === 'returned') return seen;
  const stderr = await readBounded(join(dir, 'stderr'), 4_096);
  if (exit.kind === 'interrupted') return { found: true, status: 'interrupted', error: exit.reason };
  if (exit.deadlineExceeded)
    return { found: true, status: 'failed', error: withOutput(`deadline exceeded (${exit.timeoutMs} ms): claude was stopped`, stderr) };
  return {
    found: true,
    status: 'failed',
    error: withOutput(exit.signal ? `claude was killed by ${exit.signal}` : `claude exited with code ${exit.code} and no result`, stderr),
  };
}

/** The answer to a write from a record whose start is decided, and how it reads. */
export function sendResultOf(view: RunView, seen: TurnObservation): SendResult {
  if (view.kind === 'ended' && view.exit.kind === 'spawn_failed') {
    return seen.found
      ? { outcome: 'rejected', reason: seen.error ?? view.exit.message }
      : { outcome: 'not_sent', error: `cannot start claude: ${view.exit.message}` };
  }
  if (view.kind === 'never_started' || view.kind === 'absent')
    return { outcome: 'not_sent', error: view.kind === 'never_started' ? view.reason : 'no run record' };
  return { outcome: 'accepted', seen };
}
