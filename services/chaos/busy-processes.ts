import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';

/**
 * The body of one busy process: spins, and every few million turns asks whether to stop. It
 * stops by itself once `deadline` (ms since the epoch) has passed or its parent is gone (it was
 * re-parented: `process.ppid` is no longer the pid it was given, even if that happened before it
 * ran a line), so not even a SIGKILLed chaos run can leave it spinning
 * for longer than a moment past the bound.
 */
const BUSY_LOOP = `
const deadline = Number(process.argv[1]);
const parent = Number(process.argv[2]);
for (let i = 0; ; i++) {
  if ((i & 0x3fffff) === 0 && (process.ppid !== parent || Date.now() > deadline)) process.exit(0);
}`;

/** What `startBusyProcesses` started; `stop()` ends them (idempotent, never throws). */
export interface BusyProcesses {
  /** How many are spinning (one per CPU times the factor asked for). */
  readonly count: number;
  /** The CPUs they compete for (os.availableParallelism()). */
  readonly cpus: number;
  /** Their process ids. */
  readonly pids: readonly number[];
  /** SIGKILLs every one still running and resolves once all are gone. */
  stop(): Promise<void>;
}

/**
 * Starves the machine for a chaos run (`--starved`): `perCpu` processes per CPU that do nothing
 * but spin at the same priority as Baton, so every Baton process, Postgres and Redis get a
 * fraction of a core and their timers fire late. Bounded three ways: `stop()` (the run calls it
 * in a `finally`), a synchronous SIGKILL on this process's `exit` (a second Ctrl+C exits at
 * once), and each one's own `lifetimeMs`, past which it exits by itself, as it does when this
 * process is gone.
 */
export function startBusyProcesses(perCpu: number, lifetimeMs: number): BusyProcesses {
  const cpus = availableParallelism();
  const deadline = Date.now() + lifetimeMs;
  const children: ChildProcess[] = Array.from({ length: cpus * perCpu }, () =>
    spawn(process.execPath, ['-e', BUSY_LOOP, String(deadline), String(process.pid)], { stdio: 'ignore' }),
  );
  // A child that could not start ('error', e.g. EAGAIN) never exits: it counts as gone.
  const exited = children.map((c) => new Promise<void>((resolve) => c.once('exit', () => resolve()).once('error', () => resolve())));
  const killAll = () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  process.once('exit', killAll);
  let stopping: Promise<void> | undefined;
  return {
    count: children.length,
    cpus,
    pids: children.flatMap((c) => (c.pid === undefined ? [] : [c.pid])),
    stop() {
      stopping ??= (async () => {
        killAll();
        await Promise.all(exited);
        process.off('exit', killAll);
      })();
      return stopping;
    },
  };
}
