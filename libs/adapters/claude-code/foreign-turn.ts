import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { lastTurnState } from './transcript.ts';
import { CLAUDE_CODE_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

/**
 * Claude Code has no busy guard: a `claude -p --resume` while a person's own claude is in a turn
 * of the same session runs beside it, two turns at once. Baton knows its own claude processes
 * by their run records; this finds a turn of anyone else's. Evidence, as claude 2.1.197 leaves it:
 *
 * 1. `<configDir>/sessions/<pid>.json`: every running claude (print mode and the interactive
 *    TUI) writes `{ pid, sessionId, procStart, kind, entrypoint, ... }` at start and removes it
 *    at exit; the TUI adds `status` (`busy`, `waiting` for a permission or a dialog, `idle`,
 *    `shell`). A file counts when its pid lives and, where /proc exists, that pid's start time
 *    is `procStart` (a reused pid is another process); then `idle` and `shell` are a person's
 *    TUI open on the session between turns (not a turn), anything else is a turn.
 * 2. Where /proc exists, a process whose arguments name the session (`--resume <id>`, `-r <id>`,
 *    `--session-id <id>`, or `=<id>`) and that has no sessions file: a claude starting up,
 *    before it writes one (or a version that writes none).
 * 3. The transcript: its newest turn unfinished (a prompt, a tool call or a tool result with
 *    nothing after it) and the file written within `unfinishedTurnMs`. This covers a claude
 *    this host cannot see (another pid namespace, another machine on a shared disk). A claude
 *    that died mid-turn leaves the same picture for good; the time bound is what ends it.
 *
 * A process or prompt of Baton's own is not a person's: a process whose environment names a
 * `BATON_REQUEST_ID` with a run record in the session, and a turn whose prompt carries the
 * marker of such a record, are judged by that record (the caller asks the records first).
 */

export interface ForeignTurnQuery {
  readonly configDir: string;
  readonly sessionId: string;
  /** The session's transcript. */
  readonly transcript: string;
  /** How long an unfinished turn in the transcript counts as live after its last write; 0: never. */
  readonly unfinishedTurnMs: number;
  readonly now: number;
  /** Whether Baton has a run record of this request id in the session on this host. */
  readonly isBatonRun: (requestId: string) => Promise<boolean>;
}

/** TUI states between turns (claude's `status` in its sessions file). */
const BETWEEN_TURNS = new Set(['idle', 'shell']);
const SESSION_FLAGS = new Set(['--resume', '-r', '--session-id']);

interface SessionFile {
  readonly pid?: unknown;
  readonly sessionId?: unknown;
  readonly procStart?: unknown;
  readonly status?: unknown;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Field 22 of /proc/<pid>/stat (start time in clock ticks), as claude records it; null where unreadable. */
async function procStartOf(pid: number): Promise<string | null> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** Whether a process was started by Baton for a turn of this session (its environment names the request). */
async function batonsOwn(pid: number, q: ForeignTurnQuery): Promise<boolean> {
  let environ: string;
  try {
    environ = await fs.readFile(`/proc/${pid}/environ`, 'utf8');
  } catch {
    // Another user's process, or no /proc: nothing says it is Baton's.
    return false;
  }
  const entry = environ.split('\0').find((e) => e.startsWith('BATON_REQUEST_ID='));
  return entry !== undefined && (await q.isBatonRun(entry.slice('BATON_REQUEST_ID='.length)));
}

/** Live claude processes by their sessions files: those on this session, and every pid that has a file. */
async function fromSessionFiles(q: ForeignTurnQuery): Promise<{ inTurn: Array<{ pid: number; status: string }>; withFile: Set<number> }> {
  const dir = join(q.configDir, 'sessions');
  const inTurn: Array<{ pid: number; status: string }> = [];
  const withFile = new Set<number>();
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { inTurn, withFile };
    throw err;
  }
  for (const name of names) {
    if (!/^\d+\.json$/.test(name)) continue;
    let file: SessionFile;
    try {
      file = JSON.parse(await fs.readFile(join(dir, name), 'utf8')) as SessionFile;
    } catch {
      // Removed at its process's exit, or being written: the /proc scan still sees that process.
      continue;
    }
    const pid = Number(name.slice(0, -'.json'.length));
    if (file.pid !== pid || !alive(pid)) continue;
    const started = await procStartOf(pid);
    // A reused pid: the file is a dead claude's (killed before it could remove it).
    if (started !== null && typeof file.procStart === 'string' && /^\d+$/.test(file.procStart) && started !== file.procStart) continue;
    withFile.add(pid);
    if (typeof file.sessionId !== 'string' || file.sessionId.toLowerCase() !== q.sessionId) continue;
    const status = typeof file.status === 'string' ? file.status : 'running';
    if (!BETWEEN_TURNS.has(status)) inTurn.push({ pid, status });
  }
  return { inTurn, withFile };
}

function namesSession(args: readonly string[], sessionId: string): boolean {
  return args.some((arg, i) => {
    if (SESSION_FLAGS.has(arg)) return args[i + 1]?.toLowerCase() === sessionId;
    const eq = arg.indexOf('=');
    return eq > 0 && SESSION_FLAGS.has(arg.slice(0, eq)) && arg.slice(eq + 1).toLowerCase() === sessionId;
  });
}

/** Processes whose arguments name the session and that have no sessions file (Linux only). */
async function fromCommandLines(q: ForeignTurnQuery, withFile: ReadonlySet<number>): Promise<number[]> {
  let entries: string[];
  try {
    entries = await fs.readdir('/proc');
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid || withFile.has(pid)) continue;
    let cmdline: string;
    try {
      cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmdline.toLowerCase().includes(q.sessionId) && namesSession(cmdline.split('\0'), q.sessionId)) found.push(pid);
  }
  return found;
}

/**
 * What shows a turn in progress in the session that Baton did not start, in a sentence for the
 * handoff's timeline, or null when nothing does. Per-process read errors (a process exiting
 * mid-scan, another user's) are skipped.
 * @throws when the sessions directory or the transcript exists but cannot be read.
 */
export async function findForeignTurn(q: ForeignTurnQuery): Promise<string | null> {
  const { inTurn, withFile } = await fromSessionFiles(q);
  for (const p of inTurn) {
    if (!(await batonsOwn(p.pid, q)))
      return `a claude process Baton did not start (pid ${p.pid}, ${p.status}) is in a turn of session ${q.sessionId}`;
  }
  for (const pid of await fromCommandLines(q, withFile)) {
    if (!(await batonsOwn(pid, q))) return `a claude process Baton did not start (pid ${pid}) is running on session ${q.sessionId}`;
  }
  if (q.unfinishedTurnMs <= 0) return null;
  let mtimeMs: number;
  try {
    mtimeMs = (await fs.stat(q.transcript)).mtimeMs;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const age = Math.max(0, q.now - mtimeMs);
  if (age >= q.unfinishedTurnMs) return null;
  const state = await lastTurnState(q.transcript, CLAUDE_CODE_ADAPTER_DEFAULTS.transcriptTailBytes);
  if (!state?.open) return null;
  if (state.requestId !== null && (await q.isBatonRun(state.requestId))) return null;
  return `the transcript of session ${q.sessionId} ends in ${state.waiting} of a turn Baton did not start, written ${Math.round(age / 1000)} s ago (a turn counts as live for ${Math.round(q.unfinishedTurnMs / 1000)} s after its last write)`;
}
