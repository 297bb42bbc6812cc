import { createHash, randomBytes } from 'node:crypto';
import { promises as fs, constants as fsConstants } from 'node:fs';
import { basename, dirname, join, sep } from 'node:path';

/**
 * The run record of one command turn: a directory `<runDir>/<agent>/<request>/` that outlives
 * the worker which wrote the turn. The agent's directory is the whole history of its turns, so a
 * request with no record was never started on this host.
 *
 * Files (the supervisor, command-supervisor.mjs, writes claim, started.json, exit.json):
 *   reservation.json  who reserved the request and how to read its exit (always present: the
 *                     record appears complete by renaming a filled temporary directory)
 *   stdin.txt         the turn text
 *   claim             { by: 'supervisor' | 'abandoned' }: created once (link(2)); decides for good
 *                     whether the program may start
 *   started.json      { programPid, startedAt }
 *   stdout, stderr    the program's own output (bounded when read)
 *   exit.json         how it ended (see ExitRecord)
 */

export interface Reservation {
  readonly requestId: string;
  readonly agentId: string;
  readonly handoffId: string;
  readonly attempt: number;
  readonly reservedAt: number;
  readonly reserverPid: number;
  readonly argv: readonly string[];
  readonly cwd: string | null;
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  readonly busyExitCode: number;
  readonly refusedExitCode: number;
}

export type ExitRecord =
  | {
      readonly kind: 'exited';
      readonly code: number | null;
      readonly signal: string | null;
      readonly deadlineExceeded: boolean;
      readonly timeoutMs: number;
      readonly startedAt: number;
      readonly endedAt: number;
    }
  | { readonly kind: 'spawn_failed'; readonly code: string; readonly message: string; readonly endedAt: number }
  | { readonly kind: 'interrupted'; readonly reason: string; readonly endedAt: number };

interface Claim {
  readonly by: 'supervisor' | 'abandoned';
  readonly pid: number;
  readonly at: number;
}

/** What a record says, after settling anything whose supervisor died. */
export type RunView =
  | { readonly kind: 'absent' }
  /** Reserved, and provably never started (the start was abandoned). */
  | { readonly kind: 'never_started'; readonly reason: string }
  /** A live process is starting it right now. */
  | { readonly kind: 'starting'; readonly reservation: Reservation }
  | { readonly kind: 'running'; readonly reservation: Reservation; readonly programPid: number }
  | { readonly kind: 'ended'; readonly reservation: Reservation; readonly exit: ExitRecord };

/** A file or directory name from an id: kept when it is plain, else hashed (never a path). */
export function recordName(id: string): string {
  return /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$/.test(id) ? id : `h-${createHash('sha256').update(id).digest('hex').slice(0, 40)}`;
}

export function agentDir(runDir: string, agentId: string): string {
  return join(runDir, recordName(agentId));
}

export function recordDir(runDir: string, agentId: string, requestId: string): string {
  return join(agentDir(runDir, agentId), recordName(requestId));
}

async function readJson<T>(path: string): Promise<T | null> {
  try {
    return JSON.parse(await fs.readFile(path, 'utf8')) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Creates the record complete with its reservation and the turn text, or finds that one exists.
 * The rename of a filled temporary directory onto the record's name is the atomic step: it fails
 * when the name exists, so two writers of one request id can never both start a program.
 * @returns true when this call created it.
 */
export async function createRecord(runDir: string, reservation: Reservation, stdinText: string): Promise<boolean> {
  const parent = agentDir(runDir, reservation.agentId);
  await fs.mkdir(parent, { recursive: true, mode: 0o700 });
  const target = recordDir(runDir, reservation.agentId, reservation.requestId);
  const tmp = join(parent, `.tmp-${randomBytes(8).toString('hex')}`);
  await fs.mkdir(tmp, { mode: 0o700 });
  try {
    await fs.writeFile(join(tmp, 'reservation.json'), JSON.stringify(reservation), { mode: 0o600 });
    await fs.writeFile(join(tmp, 'stdin.txt'), stdinText, { mode: 0o600 });
    await fs.rename(tmp, target);
    return true;
  } catch (err) {
    await fs.rm(tmp, { recursive: true, force: true });
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTEMPTY') return false;
    throw err;
  }
}

/** Creates `name` in `dir` with `value` unless it exists (link(2): complete or absent). @returns whether it did. */
async function createOnce(dir: string, name: string, value: unknown): Promise<boolean> {
  const tmp = join(dir, `.${name}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  await fs.writeFile(tmp, JSON.stringify(value), { mode: 0o600 });
  try {
    await fs.link(tmp, join(dir, name));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    await fs.unlink(tmp);
  }
}

/** Marks a reserved run as never to be started; false when its supervisor claimed it first. */
export function abandonStart(dir: string): Promise<boolean> {
  return createOnce(dir, 'claim', { by: 'abandoned', pid: process.pid, at: Date.now() } satisfies Claim);
}

/** Whether a process with this pid exists (EPERM: it does, owned by someone else). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether the supervisor of `dir` still runs. Where /proc exists, the pid must also still be
 * that supervisor (its command line ends with the record's agent/request names, whatever
 * spelling of the run directory started it), so a reused pid or a zombie reads as dead.
 */
async function supervisorAlive(pid: number, dir: string): Promise<boolean> {
  if (!pidAlive(pid)) return false;
  try {
    const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8');
    const tail = sep + join(basename(dirname(dir)), basename(dir));
    return cmdline.split('\0').some((arg) => arg === dir || arg.endsWith(tail));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // No /proc (macOS): the pid check is all there is. Gone between the two checks: dead.
    return code !== 'ENOENT' || !(await procExists());
  }
}

let procChecked: boolean | null = null;
async function procExists(): Promise<boolean> {
  if (procChecked === null) {
    procChecked = await fs.access('/proc/self', fsConstants.F_OK).then(
      () => true,
      () => false,
    );
  }
  return procChecked;
}

export interface InspectOptions {
  /**
   * How long a reservation without a claim is taken to be starting while its writer lives;
   * longer than the writer's own wait for the supervisor, which abandons the start after it.
   */
  readonly startGraceMs: number;
  readonly now: number;
}

/**
 * Reads a record and says where the run stands. Settles what no live process will: a
 * reservation nobody is starting is abandoned (and then never starts), and a run whose
 * supervisor died without an exit status is recorded as interrupted, after its process group
 * (which nobody would stop at the deadline any more) is killed.
 */
export async function inspectRun(dir: string, opts: InspectOptions): Promise<RunView> {
  const reservation = await readJson<Reservation>(join(dir, 'reservation.json'));
  if (!reservation) return { kind: 'absent' };
  const ended = async (): Promise<RunView | null> => {
    const exit = await readJson<ExitRecord>(join(dir, 'exit.json'));
    return exit ? { kind: 'ended', reservation, exit } : null;
  };
  const first = await ended();
  if (first) return first;
  let claim = await readJson<Claim>(join(dir, 'claim'));
  if (!claim) {
    if (opts.now - reservation.reservedAt < opts.startGraceMs && pidAlive(reservation.reserverPid))
      return { kind: 'starting', reservation };
    if (await abandonStart(dir))
      return { kind: 'never_started', reason: 'the worker that reserved the turn stopped before starting the program' };
    claim = await readJson<Claim>(join(dir, 'claim'));
    if (!claim) throw new Error(`run record ${dir}: claim vanished`);
  }
  if (claim.by === 'abandoned') return { kind: 'never_started', reason: 'the start was abandoned before the program ran' };
  const started = await readJson<{ programPid: number; startedAt: number }>(join(dir, 'started.json'));
  if (await supervisorAlive(claim.pid, dir)) {
    return started ? { kind: 'running', reservation, programPid: started.programPid } : { kind: 'starting', reservation };
  }
  // The supervisor writes its exit status and then exits: read again now that it is gone.
  const late = await ended();
  if (late) return late;
  if (started) {
    try {
      process.kill(-started.programPid, 'SIGKILL');
    } catch {
      // ESRCH: the program's group ended with its supervisor.
    }
  }
  const exit: ExitRecord = {
    kind: 'interrupted',
    reason: started
      ? 'the supervisor died before the program ended (killed?); the program was stopped and its result is unknown'
      : 'the supervisor died while starting the program (killed?)',
    endedAt: opts.now,
  };
  if (await createOnce(dir, 'exit.json', exit)) return { kind: 'ended', reservation, exit };
  const other = await ended();
  if (!other) throw new Error(`run record ${dir}: exit status vanished`);
  return other;
}

/** The names of an agent's records (request ids, as recordName made them). */
export async function listRecords(runDir: string, agentId: string): Promise<string[]> {
  try {
    return (await fs.readdir(agentDir(runDir, agentId))).filter((n) => !n.startsWith('.'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/**
 * At most `maxBytes` of a file's end (where a program's conclusion and its last error are),
 * cut at a character boundary and marked when cut.
 */
export async function readBounded(path: string, maxBytes: number): Promise<string> {
  let handle;
  try {
    handle = await fs.open(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw err;
  }
  try {
    const { size } = await handle.stat();
    const length = Math.min(size, maxBytes);
    const buf = Buffer.alloc(length);
    await handle.read(buf, 0, length, size - length);
    let start = 0;
    // Skip continuation bytes of a character the cut split.
    if (size > maxBytes) while (start < buf.length && ((buf[start] ?? 0) & 0xc0) === 0x80) start++;
    const text = buf.subarray(start).toString('utf8');
    return size > maxBytes ? `[first ${size - length + start} bytes cut]\n${text}` : text;
  } finally {
    await handle.close();
  }
}
