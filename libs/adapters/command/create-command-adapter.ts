import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import {
  earlierRequestsText,
  endOfObservation,
  type DeliveryTarget,
  type ProviderAdapter,
  type SendResult,
  type TurnEnd,
  type TurnObservation,
  type TurnRequest,
  type WatchHooks,
} from '../provider-adapter.ts';
import { INHERITED_ENV_NAMES, parseCommandSettings, type CommandSettings } from './command-settings.ts';
import { readBounded, recordDir, type Reservation, type RunView } from './run-record.ts';
import { createRunLauncher, type SupervisorJob } from './run-launcher.ts';
import { abortReason } from '../race-abort.ts';
import { assertNever } from '../../domain/errors.ts';
import { COMMAND_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

/**
 * A program that cannot be started for one of these reasons never will be until its settings (or
 * the host) change: the write is refused. Every other start error (ETXTBSY: the file is open for
 * writing, being installed; EAGAIN, ENOMEM, EMFILE, ENFILE: the host is short of something) is a
 * write that never happened, `not_sent`, which the engine holds while it lasts. A missing file
 * stays configuration: at the start nothing tells a deploy's brief gap from a wrong path
 * (libs/adapters/README.md, "A program that cannot start").
 */
const CONFIG_SPAWN_ERRORS = new Set(['ENOENT', 'EACCES', 'ENOTDIR', 'EISDIR', 'ENOEXEC', 'EPERM', 'ELOOP', 'ENAMETOOLONG']);

export interface CommandAdapterOptions {
  /**
   * Where run records live (one directory per agent, one per turn). It must survive a worker
   * restart and be shared by every worker delivering to command agents on this host. Created 0700.
   */
  readonly runDir: string;
  /** The part of the worker's environment every program inherits (see `inheritedEnv`). */
  readonly baseEnv: Readonly<Record<string, string>>;
  /** How long `sendTurn` waits for the supervisor to start the program before abandoning the start. Default 5 s. */
  readonly startWaitMs?: number;
  /** How often a run this process did not start is looked at while followed. Default 250 ms. */
  readonly pollMs?: number;
  /** Between SIGTERM and SIGKILL of a program past its deadline. Default 5 s. */
  readonly killGraceMs?: number;
}

/** The variables of `env` a program inherits (INHERITED_ENV_NAMES); for the process's entry point to pass in. */
export function inheritedEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of INHERITED_ENV_NAMES) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/** What the program reads on standard input: the message, the context packet, and the request id as a marker line. */
export function commandTurnText(turn: TurnRequest): string {
  return `${earlierRequestsText(turn)}${turn.message}\n\n${turn.packet}\n\nbaton-request-id: ${turn.requestId}\n`;
}

function turnEnv(base: Readonly<Record<string, string>>, settings: CommandSettings, turn: TurnRequest): Record<string, string> {
  return {
    ...base,
    ...settings.env,
    BATON_HANDOFF_ID: turn.handoffId,
    BATON_REQUEST_ID: turn.requestId,
    BATON_ATTEMPT: String(turn.attempt),
    BATON_FROM: turn.from,
    BATON_TITLE: turn.title ?? '',
  };
}

function describeExitCode(code: number | null, signal: string | null): string {
  return signal ? `killed by ${signal}` : `exit code ${code}`;
}

function withOutput(head: string, output: string): string {
  const text = output.trim();
  return text ? `${head}: ${text}` : head;
}

/** How a record reads as an observation; bounded output is read from its files. */
async function observationOf(dir: string, view: RunView): Promise<TurnObservation> {
  switch (view.kind) {
    case 'absent':
    case 'never_started':
      // The agent's record directory is its whole history on this host.
      return { found: false, complete: true };
    case 'starting':
      return { found: true, status: 'accepted' };
    case 'running':
      return { found: true, status: 'running' };
    case 'ended':
      break;
    default:
      return assertNever(view);
  }
  const { exit, reservation: r } = view;
  switch (exit.kind) {
    case 'spawn_failed':
      // Provably never ran. A configuration problem is the recipient refusing; anything else
      // (out of processes, of memory) is a write that never happened.
      return CONFIG_SPAWN_ERRORS.has(exit.code)
        ? { found: true, status: 'rejected', error: `cannot start ${r.argv[0] ?? ''}: ${exit.message}` }
        : { found: false, complete: true };
    case 'interrupted':
      return { found: true, status: 'interrupted', error: exit.reason };
    case 'exited':
      break;
    default:
      return assertNever(exit);
  }
  const stderr = () => readBounded(join(dir, 'stderr'), r.maxOutputBytes);
  const stdout = () => readBounded(join(dir, 'stdout'), r.maxOutputBytes);
  if (exit.deadlineExceeded) {
    return {
      found: true,
      status: 'failed',
      error: withOutput(`deadline exceeded (${exit.timeoutMs} ms): ${describeExitCode(exit.code, exit.signal)}`, await stderr()),
    };
  }
  if (exit.code === 0) {
    return {
      found: true,
      status: 'returned',
      result: { summary: (await stdout()).trimEnd(), output: { exitCode: 0, durationMs: exit.endedAt - exit.startedAt } },
    };
  }
  if (exit.code === r.busyExitCode) {
    return {
      found: true,
      status: 'busy',
      error: withOutput(`exit code ${exit.code} (busy, nothing done)`, (await stderr()) || (await stdout())),
    };
  }
  if (exit.code === r.refusedExitCode) {
    return { found: true, status: 'rejected', error: withOutput(`exit code ${exit.code} (refused)`, (await stderr()) || (await stdout())) };
  }
  return { found: true, status: 'failed', error: withOutput(describeExitCode(exit.code, exit.signal), await stderr()) };
}

function endOf(seen: TurnObservation): TurnEnd | null {
  if (!seen.found) return { status: 'unobservable', error: 'the program was never started (its run record says so)' };
  return endOfObservation(seen);
}

async function exists(path: string): Promise<boolean> {
  return fs.access(path).then(
    () => true,
    () => false,
  );
}

/**
 * The command provider: one program run per turn, by argv (never a shell), under a detached
 * supervisor that outlives the worker. Starting the program is the write, so each request id
 * gets a run record created atomically before the start; a second write of the same id starts
 * nothing and answers from the record, and every observation (by this or any later worker on the
 * host) reads the record. Exit 0 returns the bounded standard output; `busyExitCode` is busy,
 * `refusedExitCode` a refusal, anything else a failure with the bounded standard error.
 */
export function createCommandAdapter(options: CommandAdapterOptions): ProviderAdapter {
  const pollMs = options.pollMs ?? COMMAND_ADAPTER_DEFAULTS.pollMs;
  const killGraceMs = options.killGraceMs ?? COMMAND_ADAPTER_DEFAULTS.killGraceMs;
  const runs = createRunLauncher({ runDir: options.runDir, startWaitMs: options.startWaitMs ?? COMMAND_ADAPTER_DEFAULTS.startWaitMs });
  const runDir = runs.runDir;
  const { inspect, pause } = runs;
  /** Whether a run of the agent other than `except` is starting or running. */
  const liveRun = (agentId: string, except: string | null) => runs.liveRun(agentId, except);

  /** The answer to a write, from a record whose start has been decided. */
  const sendResultOf = async (dir: string, view: RunView): Promise<SendResult> => {
    const seen = await observationOf(dir, view);
    if (view.kind === 'ended' && view.exit.kind === 'spawn_failed') {
      return seen.found
        ? { outcome: 'rejected', reason: seen.error ?? view.exit.message }
        : { outcome: 'not_sent', error: `cannot start the program: ${view.exit.message}` };
    }
    if (view.kind === 'never_started' || view.kind === 'absent')
      return { outcome: 'not_sent', error: view.kind === 'never_started' ? view.reason : 'no run record' };
    return { outcome: 'accepted', seen };
  };

  const startSupervisor = async (dir: string, job: SupervisorJob, signal: AbortSignal): Promise<SendResult> => {
    const launched = await runs.launch(dir, job, signal);
    if (launched.kind === 'decided') return sendResultOf(dir, launched.view);
    return { outcome: launched.kind, error: launched.error };
  };

  return {
    provider: 'command',

    async sendTurn(target: DeliveryTarget, turn: TurnRequest, signal: AbortSignal): Promise<SendResult> {
      const parsed = parseCommandSettings(target.settings);
      if (!parsed.ok) return { outcome: 'rejected', reason: `the agent's command settings are not valid: ${parsed.problems.join('; ')}` };
      const settings = parsed.settings;
      if (signal.aborted) return { outcome: 'not_sent', error: 'aborted before the run was reserved' };
      const dir = recordDir(runDir, target.agentId, turn.requestId);
      const reservation: Reservation = {
        requestId: turn.requestId,
        agentId: target.agentId,
        handoffId: turn.handoffId,
        attempt: turn.attempt,
        reservedAt: Date.now(),
        reserverPid: process.pid,
        argv: settings.argv,
        cwd: settings.cwd,
        timeoutMs: settings.timeoutMs,
        maxOutputBytes: settings.maxOutputBytes,
        busyExitCode: settings.busyExitCode,
        refusedExitCode: settings.refusedExitCode,
      };
      // This request id was written before: never start it again, answer from its record.
      if (await exists(dir)) return sendResultOf(dir, await inspect(dir));
      // One program per agent at a time, even when a crashed worker left one running.
      try {
        if (await liveRun(target.agentId, dir)) return { outcome: 'busy', detail: 'a turn of this agent is still running' };
      } catch (err) {
        return { outcome: 'not_sent', error: `could not read the run records in ${runDir}: ${(err as Error).message}` };
      }
      let created: boolean;
      try {
        created = await runs.reserve(reservation, commandTurnText(turn));
      } catch (err) {
        return { outcome: 'not_sent', error: `could not create the run record in ${runDir}: ${(err as Error).message}` };
      }
      if (!created) {
        // A concurrent write of the same request id created it first.
        return sendResultOf(dir, await inspect(dir));
      }
      try {
        return await startSupervisor(
          dir,
          {
            argv: settings.argv,
            cwd: settings.cwd,
            env: turnEnv(options.baseEnv, settings, turn),
            timeoutMs: settings.timeoutMs,
            killGraceMs,
          },
          signal,
        );
      } catch (err) {
        // The record exists and a supervisor may have claimed it: only observation can tell.
        return { outcome: 'lost', error: (err as Error).message };
      }
    },

    async observeTurn(target: DeliveryTarget, requestId: string): Promise<TurnObservation> {
      const dir = recordDir(runDir, target.agentId, requestId);
      return observationOf(dir, await inspect(dir));
    },

    async isBusy(target: DeliveryTarget): Promise<boolean> {
      return liveRun(target.agentId, null);
    },

    async waitForTurn(target: DeliveryTarget, requestId: string, hooks: WatchHooks, signal: AbortSignal): Promise<TurnEnd> {
      const dir = recordDir(runDir, target.agentId, requestId);
      let sawRunning = false;
      for (;;) {
        if (signal.aborted) throw abortReason(signal);
        const view = await inspect(dir);
        const seen = await observationOf(dir, view);
        const end = endOf(seen);
        // A turn that ended was running before it did, even if no look caught it running.
        if (
          !sawRunning &&
          (view.kind === 'running' || (end && end.status !== 'unobservable' && view.kind === 'ended' && view.exit.kind !== 'spawn_failed'))
        ) {
          sawRunning = true;
          await hooks.onRunning();
        }
        if (end) return end;
        await pause(dir, view.kind === 'starting' ? Math.min(pollMs, 50) : pollMs, signal);
      }
    },

    async close() {
      // Runs outlive the adapter by design; their supervisors are detached and unreferenced.
    },
  };
}
