import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { commandTurnText } from '../command/create-command-adapter.ts';
import { createRunLauncher } from '../command/run-launcher.ts';
import { recordDir, type Reservation } from '../command/run-record.ts';
import {
  endOfObservation,
  type DeliveryTarget,
  type ProviderAdapter,
  type SendResult,
  type TurnEnd,
  type TurnObservation,
  type TurnRequest,
  type WatchHooks,
} from '../provider-adapter.ts';
import { parseClaudeCodeSettings, type ClaudeCodeSettings } from './claude-code-settings.ts';
import { findForeignTurn } from './foreign-turn.ts';
import { observationOf, sendResultOf } from './run-observation.ts';
import { transcriptPath } from './transcript.ts';
import { abortReason } from '../race-abort.ts';
import { CLAUDE_CODE_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

export interface ClaudeCodeAdapterOptions {
  /**
   * Where run records live, one directory per session and one per turn
   * (`<runDir>/<session>/<request>/`: the claude process's pid, its stream-json output and
   * its exit). Per host, kept across worker restarts, shared by every worker of the host.
   */
  readonly runDir: string;
  /** The part of the worker's environment claude inherits (`inheritedEnv(process.env)`: PATH, HOME, ...). */
  readonly baseEnv: Readonly<Record<string, string>>;
  /** How long `sendTurn` waits for the supervisor to start claude. Default 5 s. */
  readonly startWaitMs?: number;
  /** How often a run this process did not start is looked at while followed. Default 250 ms. */
  readonly pollMs?: number;
  /** Between SIGTERM and SIGKILL of a turn past its deadline. Default 5 s. */
  readonly killGraceMs?: number;
  /** The clock the transcript's age is measured with (`unfinishedTurnMs`). Default Date.now. */
  readonly now?: () => number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether the agent names an existing Claude Code session (its target is a session id). */
export function namesSession(target: DeliveryTarget): boolean {
  return target.target !== null && UUID.test(target.target);
}

/**
 * The session an agent's turns go to: its target when that is a session id; otherwise (no
 * target, or the default, the agent's handle) a session id derived from the agent id and the
 * target (a UUID, as `--session-id` wants), so that its first turn creates the session and every
 * later one resumes it without Baton storing anything.
 */
export function claudeSessionId(target: DeliveryTarget): string {
  if (namesSession(target)) return (target.target as string).toLowerCase();
  const h = createHash('sha256')
    .update(`baton-claude-code-session:${target.agentId}:${target.target ?? ''}`)
    .digest('hex');
  // Version 4 / variant bits set, so the CLI's UUID check accepts it.
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${((parseInt(h.slice(16, 17), 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** Where Claude Code keeps the session's state (and where its login lives). */
function configDirOf(settings: ClaudeCodeSettings, env: Readonly<Record<string, string>>): string | null {
  if (settings.configDir) return settings.configDir;
  const home = env['HOME'];
  return home ? join(home, '.claude') : null;
}

/**
 * The `claude_code` provider: each turn is one `claude -p` process in the session's working
 * directory, `--resume <session>` (or `--session-id` for a session that has no transcript yet),
 * the turn text with its marker line on standard input, `--output-format stream-json`. The
 * process runs under the command provider's detached supervisor with a run record per request
 * id, grouped by session: it outlives the worker, is started at most once per request id, and
 * no turn starts while another claude process of Baton's is alive in the same session, nor while
 * a turn Baton did not start (a person's) is in progress there (foreign-turn.ts): Claude Code
 * has no busy guard of its own; Baton's lock and these are the guard. The stream's result is the
 * turn's end (`is_error` → failed, its kind classified by claude-failure.ts); without a record
 * the session's transcript is scanned for the marker.
 */
export function createClaudeCodeAdapter(options: ClaudeCodeAdapterOptions): ProviderAdapter {
  const pollMs = options.pollMs ?? CLAUDE_CODE_ADAPTER_DEFAULTS.pollMs;
  const now = options.now ?? Date.now;
  const killGraceMs = options.killGraceMs ?? CLAUDE_CODE_ADAPTER_DEFAULTS.killGraceMs;
  const runs = createRunLauncher({ runDir: options.runDir, startWaitMs: options.startWaitMs ?? CLAUDE_CODE_ADAPTER_DEFAULTS.startWaitMs });
  const runDir = runs.runDir;
  const group = (sessionId: string) => `session-${sessionId}`;

  function envOf(settings: ClaudeCodeSettings, turn: TurnRequest | null): Record<string, string> {
    const env: Record<string, string> = {
      ...options.baseEnv,
      // No update checks, telemetry or error reports from a headless turn (recipe 1.1): the one
      // variable that stops every connection but the model's.
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
      ...settings.env,
    };
    if (settings.configDir) env['CLAUDE_CONFIG_DIR'] = settings.configDir;
    if (settings.apiKey) env['ANTHROPIC_API_KEY'] = settings.apiKey;
    if (turn) {
      env['BATON_HANDOFF_ID'] = turn.handoffId;
      env['BATON_REQUEST_ID'] = turn.requestId;
      env['BATON_ATTEMPT'] = String(turn.attempt);
      env['BATON_FROM'] = turn.from;
      env['BATON_TITLE'] = turn.title ?? '';
    }
    return env;
  }

  /** The transcript of the target's session, or null when no config directory can be named. */
  function transcriptOf(target: DeliveryTarget, settings: ClaudeCodeSettings): string | null {
    const configDir = configDirOf(settings, envOf(settings, null));
    return configDir ? transcriptPath(configDir, settings.cwd, claudeSessionId(target)) : null;
  }

  /**
   * A turn in progress in the session that Baton did not start (a person's claude; see
   * foreign-turn.ts), described, or null. Asked after the run records found no run of Baton's.
   */
  async function foreignTurn(target: DeliveryTarget, settings: ClaudeCodeSettings): Promise<string | null> {
    const configDir = configDirOf(settings, envOf(settings, null));
    if (!configDir) return null;
    const sessionId = claudeSessionId(target);
    return findForeignTurn({
      configDir,
      sessionId,
      transcript: transcriptPath(configDir, settings.cwd, sessionId),
      unfinishedTurnMs: settings.unfinishedTurnMs,
      now: now(),
      isBatonRun: (requestId) =>
        fs.access(recordDir(runDir, group(sessionId), requestId)).then(
          () => true,
          () => false,
        ),
    });
  }

  function argvOf(settings: ClaudeCodeSettings, sessionId: string, resume: boolean): string[] {
    const argv = [settings.binary, '-p', '--output-format', 'stream-json', '--verbose', '--permission-mode', settings.permissionMode];
    if (settings.model) argv.push('--model', settings.model);
    argv.push(resume ? '--resume' : '--session-id', sessionId);
    // Variadic: given last with '=', so it can swallow nothing else.
    if (settings.allowedTools.length > 0) argv.push(`--allowedTools=${settings.allowedTools.join(',')}`);
    return argv;
  }

  async function follow(
    target: DeliveryTarget,
    settings: ClaudeCodeSettings,
    requestId: string,
    hooks: WatchHooks,
    signal: AbortSignal,
  ): Promise<TurnEnd> {
    const dir = recordDir(runDir, group(claudeSessionId(target)), requestId);
    let sawRunning = false;
    for (;;) {
      if (signal.aborted) throw abortReason(signal);
      const view = await runs.inspect(dir);
      const seen = await observationOf(dir, view, transcriptOf(target, settings), requestId);
      const end = seen.found
        ? endOfObservation(seen)
        : { status: 'unobservable' as const, error: 'claude was never started for this turn (its run record and the transcript say so)' };
      // A turn that ended was running before it did, even if no look caught it running.
      if (!sawRunning && seen.found && seen.status !== 'accepted' && seen.status !== 'rejected') {
        sawRunning = true;
        await hooks.onRunning();
      }
      if (end) return end;
      await runs.pause(dir, view.kind === 'starting' ? Math.min(pollMs, 50) : pollMs, signal);
    }
  }

  return {
    provider: 'claude_code',
    // A failed turn's prompt stays in the session's transcript: later turns are told what they replace.
    sessionKeepsPrompts: true,
    // sendTurn answers busy itself (no write) while a claude process of Baton's is alive in the
    // session, or a turn it did not start is in progress there.
    reportsBusyOnSend: true,

    async sendTurn(target: DeliveryTarget, turn: TurnRequest, signal: AbortSignal): Promise<SendResult> {
      const parsed = parseClaudeCodeSettings(target.settings);
      if (!parsed.ok)
        return { outcome: 'rejected', reason: `the agent's claude_code settings are not valid: ${parsed.problems.join('; ')}` };
      const settings = parsed.settings;
      if (signal.aborted) return { outcome: 'not_sent', error: 'aborted before the run was reserved' };
      const sessionId = claudeSessionId(target);
      const dir = recordDir(runDir, group(sessionId), turn.requestId);
      const answerFromRecord = async (): Promise<SendResult> => {
        const view = await runs.inspect(dir);
        return sendResultOf(view, await observationOf(dir, view, transcriptOf(target, settings), turn.requestId));
      };
      // Written before: never start it again.
      if (
        await fs.access(dir).then(
          () => true,
          () => false,
        )
      )
        return answerFromRecord();
      try {
        if (await runs.liveRun(group(sessionId), dir))
          return { outcome: 'busy', detail: `a claude process of Baton's is still running in session ${sessionId}` };
      } catch (err) {
        return { outcome: 'not_sent', error: `could not read the run records in ${runDir}: ${(err as Error).message}` };
      }
      const transcript = transcriptOf(target, settings);
      if (!transcript) return { outcome: 'rejected', reason: 'cannot locate the session: set configDir (or HOME for the worker)' };
      try {
        const foreign = await foreignTurn(target, settings);
        if (foreign) return { outcome: 'busy', detail: foreign };
      } catch (err) {
        return {
          outcome: 'not_sent',
          error: `could not tell whether a turn Baton did not start runs in session ${sessionId}: ${(err as Error).message}`,
        };
      }
      let resume: boolean;
      try {
        resume = await fs.access(transcript).then(
          () => true,
          () => false,
        );
      } catch (err) {
        return { outcome: 'not_sent', error: (err as Error).message };
      }
      // A session the agent was registered with must exist where it is looked for: starting it
      // afresh would write the turn into a new, empty conversation.
      if (!resume && namesSession(target))
        return {
          outcome: 'gone',
          reason: `session ${sessionId} has no transcript at ${transcript} (a different cwd or configDir, or deleted)`,
        };
      const argv = argvOf(settings, sessionId, resume);
      const reservation: Reservation = {
        requestId: turn.requestId,
        agentId: group(sessionId),
        handoffId: turn.handoffId,
        attempt: turn.attempt,
        reservedAt: Date.now(),
        reserverPid: process.pid,
        argv,
        cwd: settings.cwd,
        timeoutMs: settings.timeoutMs,
        maxOutputBytes: settings.maxOutputBytes,
        // Claude's exit codes carry no busy or refusal meaning; the stream's result does.
        busyExitCode: 75,
        refusedExitCode: 77,
      };
      let created: boolean;
      try {
        created = await runs.reserve(reservation, commandTurnText(turn));
      } catch (err) {
        return { outcome: 'not_sent', error: `could not create the run record in ${runDir}: ${(err as Error).message}` };
      }
      if (!created) return answerFromRecord();
      try {
        const launched = await runs.launch(
          dir,
          { argv, cwd: settings.cwd, env: envOf(settings, turn), timeoutMs: settings.timeoutMs, killGraceMs },
          signal,
        );
        if (launched.kind !== 'decided') return { outcome: launched.kind, error: launched.error };
        return sendResultOf(launched.view, await observationOf(dir, launched.view, transcriptOf(target, settings), turn.requestId));
      } catch (err) {
        // The record exists and a supervisor may have claimed it: only observation can tell.
        return { outcome: 'lost', error: (err as Error).message };
      }
    },

    async observeTurn(target: DeliveryTarget, requestId: string): Promise<TurnObservation> {
      const parsed = parseClaudeCodeSettings(target.settings);
      if (!parsed.ok) throw new Error(`the agent's claude_code settings are not valid: ${parsed.problems.join('; ')}`);
      const dir = recordDir(runDir, group(claudeSessionId(target)), requestId);
      return observationOf(dir, await runs.inspect(dir), transcriptOf(target, parsed.settings), requestId);
    },

    async isBusy(target: DeliveryTarget): Promise<boolean> {
      if (await runs.liveRun(group(claudeSessionId(target)), null)) return true;
      const parsed = parseClaudeCodeSettings(target.settings);
      // Settings no longer valid: the write refuses the turn anyway; only Baton's runs can be asked.
      return parsed.ok && (await foreignTurn(target, parsed.settings)) !== null;
    },

    async waitForTurn(target: DeliveryTarget, requestId: string, hooks: WatchHooks, signal: AbortSignal): Promise<TurnEnd> {
      const parsed = parseClaudeCodeSettings(target.settings);
      if (!parsed.ok)
        return { status: 'unobservable', error: `the agent's claude_code settings are not valid: ${parsed.problems.join('; ')}` };
      return follow(target, parsed.settings, requestId, hooks, signal);
    },

    async close() {
      // Turns outlive the adapter by design; their supervisors are detached and unreferenced.
    },
  };
}
