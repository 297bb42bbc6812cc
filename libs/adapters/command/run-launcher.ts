import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  abandonStart,
  agentDir,
  createRecord,
  inspectRun,
  listRecords,
  readBounded,
  type Reservation,
  type RunView,
} from './run-record.ts';
import { abortReason } from '../race-abort.ts';

const SUPERVISOR = fileURLToPath(new URL('./command-supervisor.mjs', import.meta.url));

/** What command-supervisor.mjs is handed on its standard input (never written to disk: `env` may hold secrets). */
export interface SupervisorJob {
  readonly argv: readonly string[];
  readonly cwd: string | null;
  readonly env: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly killGraceMs: number;
}

/** How a launch went: the record's view once its start is decided, or a write that provably did not / may have happened. */
export type LaunchResult =
  | { readonly kind: 'decided'; readonly view: RunView }
  | { readonly kind: 'not_sent'; readonly error: string }
  | { readonly kind: 'lost'; readonly error: string };

export interface RunLauncherOptions {
  /** Where run records live: `<runDir>/<group>/<request>/` (see run-record.ts). Created 0700. */
  readonly runDir: string;
  /** How long a launch waits for the supervisor to start the program before abandoning the start. */
  readonly startWaitMs: number;
}

function withOutput(head: string, output: string): string {
  const text = output.trim();
  return text ? `${head}: ${text}` : head;
}

/**
 * The process side of every adapter whose write is starting a program (command, Claude Code):
 * run records created once per request id, a detached supervisor per run that outlives the
 * worker, and the reads that settle what a dead supervisor or writer left behind. A record's
 * group (`agentDir`) is the unit of "one run at a time": the command adapter groups by agent,
 * the Claude Code adapter by session.
 */
export function createRunLauncher(options: RunLauncherOptions) {
  const runDir = resolve(options.runDir);
  const startWaitMs = options.startWaitMs;
  // Past the writer's own wait, with room for a slow host: only then may an observer abandon a start.
  const inspectOpts = () => ({ startGraceMs: startWaitMs * 3, now: Date.now() });
  /** Supervisors this process started, by record: their exit wakes whoever follows the run. */
  const live = new Map<string, { exited: boolean; wakers: Set<() => void> }>();
  /** Records known to have ended (final): busy checks skip them. Bounded; forgetting one costs a re-read. */
  const finished = new Set<string>();
  const FINISHED_CACHE = 10_000;
  let runDirReady: Promise<void> | null = null;

  const ensureRunDir = () => {
    runDirReady ??= fs.mkdir(runDir, { recursive: true, mode: 0o700 }).then(async () => {
      // mkdir's mode is filtered by the umask and ignored for a directory that exists.
      await fs.chmod(runDir, 0o700);
    });
    return runDirReady.catch((err: unknown) => {
      runDirReady = null;
      throw err;
    });
  };

  /** Waits `ms`, or less when the local supervisor of `dir` exits; rejects on abort. */
  const pause = (dir: string, ms: number, signal?: AbortSignal) =>
    new Promise<void>((resolvePause, reject) => {
      const entry = live.get(dir);
      if (entry?.exited) return resolvePause();
      const done = () => {
        clearTimeout(timer);
        entry?.wakers.delete(done);
        signal?.removeEventListener('abort', onAbort);
        resolvePause();
      };
      const onAbort = () => {
        clearTimeout(timer);
        entry?.wakers.delete(done);
        reject(abortReason(signal as AbortSignal));
      };
      const timer = setTimeout(done, ms);
      entry?.wakers.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });

  const inspect = async (dir: string): Promise<RunView> => {
    const view = await inspectRun(dir, inspectOpts());
    if ((view.kind === 'ended' || view.kind === 'never_started') && !finished.has(dir)) {
      if (finished.size >= FINISHED_CACHE) finished.clear();
      finished.add(dir);
    }
    return view;
  };

  /** Whether a run of `group` other than `except` is starting or running. */
  const liveRun = async (group: string, except: string | null): Promise<boolean> => {
    for (const name of await listRecords(runDir, group)) {
      const dir = join(agentDir(runDir, group), name);
      if (dir === except || finished.has(dir)) continue;
      const view = await inspect(dir);
      if (view.kind === 'starting' || view.kind === 'running') return true;
    }
    return false;
  };

  /** Creates the run record (false: one exists for this request id already). */
  const reserve = async (reservation: Reservation, stdinText: string): Promise<boolean> => {
    await ensureRunDir();
    return createRecord(runDir, reservation, stdinText);
  };

  /** Starts the supervisor of a freshly reserved record and waits until the start is decided. */
  const launch = async (dir: string, job: SupervisorJob, signal: AbortSignal): Promise<LaunchResult> => {
    let log: fs.FileHandle;
    try {
      log = await fs.open(join(dir, 'supervisor.log'), 'w', 0o600);
    } catch (err) {
      await abandonStart(dir);
      return { kind: 'not_sent', error: `could not write the run record: ${(err as Error).message}` };
    }
    let child: ChildProcess;
    try {
      // An empty environment: the worker's (NODE_OPTIONS included) must not shape the supervisor.
      child = spawn(process.execPath, [SUPERVISOR, dir], { detached: true, stdio: ['pipe', 'ignore', log.fd], env: {} });
    } catch (err) {
      await log.close();
      await abandonStart(dir);
      return { kind: 'not_sent', error: `could not start the supervisor: ${(err as Error).message}` };
    }
    await log.close();
    const entry = { exited: false, wakers: new Set<() => void>() };
    live.set(dir, entry);
    const onGone = () => {
      entry.exited = true;
      for (const wake of [...entry.wakers]) wake();
      live.delete(dir);
    };
    child.once('exit', onGone);
    child.once('error', onGone);
    child.unref();
    child.stdin?.on('error', () => {
      // EPIPE: the supervisor is gone; the wait below notices.
    });
    child.stdin?.end(JSON.stringify(job));

    const deadline = Date.now() + startWaitMs;
    for (;;) {
      const view = await inspect(dir);
      if (view.kind !== 'starting') return { kind: 'decided', view };
      // The engine's write deadline: the start may still happen, so only observation can tell.
      if (signal.aborted) return { kind: 'lost', error: 'the write was cut off while the program was starting' };
      if (entry.exited || Date.now() > deadline) {
        if (await abandonStart(dir)) {
          if (!entry.exited && child.pid !== undefined) child.kill('SIGKILL');
          const text = (await readBounded(join(dir, 'supervisor.log'), 2_000)).trim();
          return {
            kind: 'not_sent',
            error: entry.exited
              ? withOutput('the supervisor exited before starting the program', text)
              : `the supervisor did not start the program within ${startWaitMs} ms`,
          };
        }
        // The supervisor claimed the start: it is starting the program (or died doing it, which
        // the next look settles). Give it one more wait before calling the write lost.
        if (!entry.exited && Date.now() > deadline + startWaitMs)
          return { kind: 'lost', error: 'the supervisor took the turn but did not report the start in time' };
      }
      await pause(dir, 10);
    }
  };

  return { runDir, ensureRunDir, pause, inspect, liveRun, reserve, launch };
}

export type RunLauncher = ReturnType<typeof createRunLauncher>;
