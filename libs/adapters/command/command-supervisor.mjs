// The supervisor of one command turn. The command adapter starts it detached (its own process
// group, reparented to init if the worker dies) so that a turn outlives the worker that wrote it:
// it starts the program, enforces the deadline and writes the exit status into the run record,
// which any later worker observes. Plain JavaScript so that `node` runs it without a loader.
//
// argv: <record dir>. Standard input: one JSON object { argv, cwd, env, timeoutMs, killGraceMs }
// (the environment travels here, not on disk, because it may hold secrets).
//
// Record files it writes (run-record.ts reads them):
//   claim         created by link(2) before anything starts: { by: "supervisor", pid }. An
//                 observer that finds a stale reservation creates it first as { by: "abandoned" },
//                 and then this supervisor starts nothing.
//   started.json  { programPid, startedAt } once the program runs (its pid is its process group)
//   stdout, stderr the program's output, written by the program itself (no pipe through here)
//   exit.json     { kind: "exited", code, signal, deadlineExceeded, ... } or
//                 { kind: "spawn_failed", code, message }, written with write + rename
import { spawn } from 'node:child_process';
import { closeSync, linkSync, openSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
if (!dir) process.exit(2);

function writeAtomically(name, value) {
  const tmp = join(dir, `.${name}.${process.pid}.tmp`);
  writeFileSync(tmp, JSON.stringify(value), { mode: 0o600 });
  renameSync(tmp, join(dir, name));
}

/** Creates `name` with `value` unless it exists; link(2) makes the file appear complete or not at all. */
function createOnce(name, value) {
  const tmp = join(dir, `.${name}.${process.pid}.tmp`);
  writeFileSync(tmp, JSON.stringify(value), { mode: 0o600 });
  try {
    linkSync(tmp, join(dir, name));
    return true;
  } catch (err) {
    if (err.code === 'EEXIST') return false;
    throw err;
  } finally {
    unlinkSync(tmp);
  }
}

function killGroup(pgid, signal) {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

let job;
try {
  job = await readStdin();
} catch {
  // The worker died while handing over the job: nothing was claimed, nothing starts.
  process.exit(3);
}

if (!createOnce('claim', { by: 'supervisor', pid: process.pid, at: Date.now() })) process.exit(0);

function spawnFailed(code, message) {
  writeAtomically('exit.json', { kind: 'spawn_failed', code, message, endedAt: Date.now() });
  process.exit(0);
}

if (job.cwd) {
  let isDir;
  try {
    isDir = statSync(job.cwd).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) spawnFailed('ENOENT', `the working directory ${job.cwd} does not exist or is not a directory`);
}

const stdin = openSync(join(dir, 'stdin.txt'), 'r');
const stdout = openSync(join(dir, 'stdout'), 'w', 0o600);
const stderr = openSync(join(dir, 'stderr'), 'w', 0o600);
let child;
try {
  child = spawn(job.argv[0], job.argv.slice(1), {
    cwd: job.cwd ?? undefined,
    env: job.env,
    stdio: [stdin, stdout, stderr],
    // Its own process group, so the deadline can kill everything it started.
    detached: true,
  });
} catch (err) {
  spawnFailed(err.code ?? 'EINVAL', err.message);
}
for (const fd of [stdin, stdout, stderr]) closeSync(fd);

child.once('error', (err) => {
  // Only a failed start reaches here without a pid (ENOENT, EACCES on the binary, ...).
  if (child.pid === undefined) spawnFailed(err.code ?? 'UNKNOWN', err.message);
});

if (child.pid !== undefined) {
  const pgid = child.pid;
  const startedAt = Date.now();
  writeAtomically('started.json', { programPid: pgid, startedAt });
  let deadlineExceeded = false;
  let graceTimer;
  const deadlineTimer = setTimeout(() => {
    deadlineExceeded = true;
    killGroup(pgid, 'SIGTERM');
    graceTimer = setTimeout(() => killGroup(pgid, 'SIGKILL'), job.killGraceMs);
  }, job.timeoutMs);
  child.once('exit', (code, signal) => {
    clearTimeout(deadlineTimer);
    clearTimeout(graceTimer);
    // A turn leaves nothing running behind it: whatever the program started in its group goes too.
    killGroup(pgid, 'SIGKILL');
    writeAtomically('exit.json', {
      kind: 'exited',
      code,
      signal,
      deadlineExceeded,
      timeoutMs: job.timeoutMs,
      startedAt,
      endedAt: Date.now(),
    });
    process.exit(0);
  });
}
