/**
 * The provider adapters' tunable numbers (libs/adapters): one frozen, validated object per adapter,
 * each value with its doc line. Part of the component defaults: component-defaults.ts re-exports
 * them and lists them in COMPONENT_DEFAULTS, from which the libs/config README's table is made.
 */
import { componentDefaults } from './validated-defaults.ts';

/** The webhook adapter (libs/adapters/webhook). */
export const WEBHOOK_ADAPTER_DEFAULTS = componentDefaults('webhook adapter', {
  /** Deadline of one HTTP exchange when the agent's settings name none. */
  timeoutMs: 30_000,
  /** Bytes of an answer read at most. */
  maxAnswerBytes: 256 * 1024,
  /** How often a followed turn is looked at. */
  pollMs: 1_000,
  /** Status URLs named by a 202 remembered for the turns this process follows (the oldest goes first; the settings' template survives a restart). */
  statusUrlsKept: 10_000,
  /** Looks in a row that could not ask anything before a follow gives up (the engine then retries or goes UNCERTAIN). */
  failedLooksMax: 3,
  /** Status-URL 404s in a row for an accepted turn before it is called unobservable. */
  absentLooksMax: 3,
});

/** The demo adapter and its client of the shared demo host (libs/adapters/demo). */
export const DEMO_ADAPTER_DEFAULTS = componentDefaults('demo adapter', {
  /** Long-poll window for watching a turn; short enough to notice an abort quickly. */
  watchPollMs: 5_000,
  /** Deadline of one call to the demo host when the call names none. */
  hostCallTimeoutMs: 10_000,
  /** Connections of the client's pool for calls (long polls have their own). */
  hostCallConnections: 256,
  /** The demo host's longest long poll, whatever window a watcher asks for. */
  hostLongPollMaxMs: 30_000,
});

/** The command adapter (libs/adapters/command). */
export const COMMAND_ADAPTER_DEFAULTS = componentDefaults('command adapter', {
  /** How often a run this process did not start is looked at while followed. */
  pollMs: 250,
  /** Between SIGTERM and SIGKILL of a program past its deadline. */
  killGraceMs: 5_000,
  /** How long `sendTurn` waits for the supervisor to start the program before abandoning the start. */
  startWaitMs: 5_000,
});

/** The claude_code adapter (libs/adapters/claude-code). */
export const CLAUDE_CODE_ADAPTER_DEFAULTS = componentDefaults('claude_code adapter', {
  /** How often a run this process did not start is looked at while followed. */
  pollMs: 250,
  /** Between SIGTERM and SIGKILL of a claude past its deadline. */
  killGraceMs: 5_000,
  /** How long `sendTurn` waits for the supervisor to start claude before abandoning the start. */
  startWaitMs: 5_000,
  /** Bytes of a transcript's end read to tell a foreign turn's state: the last turn's lines (a tool's output can be large). */
  transcriptTailBytes: 1024 * 1024,
});

/** The codex adapter (libs/adapters/codex). */
export const CODEX_ADAPTER_DEFAULTS = componentDefaults('codex adapter', {
  /** How often a turn this worker did not start is looked at while followed. */
  pollMs: 500,
  /** How long starting the app-server daemon (if needed), connecting and `initialize` may take. */
  startTimeoutMs: 25_000,
  /** First pause before connecting again to a daemon that could not be reached; it doubles per failure... */
  reconnectFirstMs: 250,
  /** ...up to this. */
  reconnectMaxMs: 30_000,
  /** Deadline of moving a daemon to another environment: asking for its active threads and stopping it. */
  envSwitchTimeoutMs: 20_000,
  /** How long a stopped daemon's exit is waited for before a new one is connected to. */
  daemonExitWaitMs: 5_000,
  /** Deadline of unloading a thread nobody uses any more (`thread/unsubscribe`). */
  unsubscribeTimeoutMs: 10_000,
  /** How long the control socket waits for the daemon's side to close after the close frame, before destroying it. */
  socketCloseMs: 2_000,
});

/** The outage guard's status check (libs/adapters/provider-status.ts). */
export const PROVIDER_STATUS_DEFAULTS = componentDefaults('provider status', {
  /** A status page's answer is reused for this long. */
  cacheMs: 5_000,
  /** Deadline of one status page fetch. */
  timeoutMs: 2_000,
});
