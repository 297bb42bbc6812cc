import type { UnexpectedExit } from './chaos-environment.ts';
import { n, row, type InvariantRow } from './invariant-row.ts';

/**
 * The checks of a chaos run as a whole rather than of what its handoffs did: that no Baton
 * process stopped unless the run stopped it, and that everything settled in time once the
 * faults ended. Pure functions, like invariants.ts.
 */

/** The Baton processes of a run: how many it started in all and how many it killed on purpose (its SIGKILL faults). */
export interface ProcessCounts {
  readonly started: number;
  readonly killedOnPurpose: number;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * No Baton process (an API, a worker, the demo host) exited unless the run stopped it: a fault
 * of Redis or Postgres, a stalled or dropped connection, a starved CPU may make a process
 * unready, never end it. Each such exit is one violation (the run restarts the process, as a
 * supervisor would, so the rest of the run still means something), a failed start included.
 * Not counted: an API start that found its port taken, a port the harness picked.
 */
export function checkNoUnplannedExits(exits: readonly UnexpectedExit[], processes: ProcessCounts, runStartedAt: number): InvariantRow {
  const unplanned = exits.filter((e) => e.portTaken !== true);
  const portTaken = exits.length - unplanned.length;
  const problems = unplanned.map(
    (e) =>
      `${e.slot} exited (${e.code !== null ? `code ${e.code}` : `signal ${e.signal ?? '?'}`}) ${e.wasServing ? 'while serving' : 'before it served'}, ${seconds(e.at - runStartedAt)} into the run: ${e.reason}`,
  );
  return row(
    'no Baton process exited unplanned',
    problems,
    `${n(processes.started)} processes started, ${n(processes.killedOnPurpose)} of them SIGKILLed on purpose; ${unplanned.length === 0 ? 'no other exit' : `${n(unplanned.length)} exited by themselves`}${portTaken > 0 ? ` (not counted: ${portTaken} API start(s) on a port the harness picked and found taken)` : ''}`,
  );
}

/** All final within the deadline after the last fault ended. */
export function checkSettleTime(lastFaultEndedAt: number, allFinalAt: number | null, deadlineMs: number): InvariantRow {
  if (allFinalAt === null) {
    return row(
      'last fault to all final',
      [`not all final within the deadline of ${seconds(deadlineMs)}`],
      `not reached (deadline ${seconds(deadlineMs)})`,
      1,
    );
  }
  const took = Math.max(0, allFinalAt - lastFaultEndedAt);
  const late = took > deadlineMs ? [`took ${seconds(took)}, deadline ${seconds(deadlineMs)}`] : [];
  return row('last fault to all final', late, `${seconds(took)} (deadline ${seconds(deadlineMs)})`);
}
