import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentCli, agentClisDir } from './agent-clis.ts';
import { eventually } from './eventually.ts';
import { startEgressTripwire, type EgressTripwire } from './fake-models/egress-tripwire.ts';
import { startFakeModelServer, type FakeModelServer } from './fake-models/fake-model-server.ts';
import { holdableReplies, responsesProtocol } from './fake-models/responses.ts';

/**
 * The real `codex` CLI wired to the fake Responses server on loopback, with the egress tripwire
 * as its proxy: a fresh CODEX_HOME whose config.toml names the fake as the model provider and
 * switches off everything that phones home (recipe 2.1), a working directory, and the
 * environment the app-server daemon (or `codex exec`) needs. The adapter starts the home's
 * daemon on first use; `close()` stops it and waits until its process is gone.
 */
export interface CodexFixture {
  readonly binary: string;
  readonly root: string;
  readonly codexHome: string;
  readonly cwd: string;
  readonly fake: FakeModelServer;
  readonly tripwire: EgressTripwire;
  /** What a worker passes `codex app-server daemon start` (HOME, PATH, the proxy tripwire). */
  readonly env: Record<string, string>;
  /** A reply the fake holds until `release()`: the turn stays active meanwhile. */
  hold(text: string): ReturnType<ReturnType<typeof holdableReplies>['hold']>;
  /**
   * Runs `codex exec` outside Baton: a new thread with one turn, or a turn of `resume`; resolves
   * with the thread id when the process exits. `onEvent` gets each of its `--json` events as
   * it prints them (`turn.completed` says the turn ended, before the process has exited).
   */
  execThread(prompt: string, resume?: string, onEvent?: (event: { type?: string }) => void): Promise<string>;
  /** The pid of the home's running app-server daemon (its pid record), or null when none runs. */
  daemonPid(): number | null;
  /** Stops the home's daemon (`codex app-server daemon stop`) and waits until its process is gone. */
  stopDaemon(): Promise<void>;
  close(): Promise<void>;
}

export interface CodexFixtureOptions {
  /** The fake provider's `env_key`: Codex then sends `authorization: Bearer $<envKey>` and fails a turn without it. */
  readonly envKey?: string;
  /** Point the home's daemon package at the installed CLI's (default true); false leaves the home as fresh as `codex login` makes it. */
  readonly pinPackage?: boolean;
}

export async function startCodexFixture(options: CodexFixtureOptions = {}): Promise<CodexFixture> {
  const binary = agentCli('codex');
  const holdable = holdableReplies(responsesProtocol);
  const fake = await startFakeModelServer([holdable.handler]);
  const tripwire = await startEgressTripwire();
  const root = mkdtempSync(join(tmpdir(), 'baton-codex-'));
  const codexHome = join(root, 'codex-home');
  const cwd = join(root, 'work');
  mkdirSync(codexHome);
  mkdirSync(cwd);
  writeFileSync(
    join(codexHome, 'config.toml'),
    [
      'model = "gpt-5.5"',
      'model_provider = "fake"',
      'check_for_update_on_startup = false',
      '[analytics]',
      'enabled = false',
      '[features]',
      'plugins = false',
      '[model_providers.fake]',
      'name = "Fake loopback"',
      `base_url = "${fake.url}/v1"`,
      ...(options.envKey ? [`env_key = "${options.envKey}"`] : []),
      'wire_api = "responses"',
      'request_max_retries = 0',
      'stream_max_retries = 0',
      'stream_idle_timeout_ms = 60000',
      '',
    ].join('\n'),
  );
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: join(root, 'home'),
    CODEX_HOME: codexHome,
    ...tripwire.env(),
  };
  mkdirSync(env['HOME']!);
  if (options.pinPackage !== false) pinDaemonPackage(codexHome);
  const daemonPid = (): number | null => {
    try {
      const pid = (JSON.parse(readFileSync(join(codexHome, 'app-server-daemon', 'daemon.pid'), 'utf8')) as { pid?: unknown }).pid;
      return typeof pid === 'number' && isRunning(pid) ? pid : null;
    } catch {
      return null;
    }
  };
  const stopDaemon = async (): Promise<void> => {
    const pid = daemonPid();
    if (pid === null) return;
    await new Promise<void>((resolve, reject) => {
      const child = spawn(binary, ['app-server', 'daemon', 'stop'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
      child.on('error', reject);
      child.on('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`codex app-server daemon stop exited ${code}: ${err.slice(-500)}`)),
      );
    });
    await eventually(() => expectGone(pid), { timeoutMs: 10_000, what: `the codex app-server daemon (pid ${pid}) exits` });
  };
  return {
    binary,
    root,
    codexHome,
    cwd,
    fake,
    tripwire,
    env,
    hold: (text) => holdable.hold(text),
    execThread(prompt, resume, onEvent) {
      return new Promise<string>((resolve, reject) => {
        const child = spawn(binary, ['exec', '--skip-git-repo-check', '--json', ...(resume ? ['resume', resume] : []), prompt], {
          cwd,
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        let seen = 0;
        let threadId: string | undefined;
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString('utf8');
          // Each complete line printed since the last chunk, as it arrives.
          const end = out.lastIndexOf('\n') + 1;
          for (const line of out.slice(seen, end).split('\n')) {
            if (!line.startsWith('{')) continue;
            let event: { type?: string; thread_id?: string };
            try {
              event = JSON.parse(line) as { type?: string; thread_id?: string };
            } catch {
              continue; // Not an event line.
            }
            if (event.type === 'thread.started') threadId = event.thread_id;
            onEvent?.(event);
          }
          seen = Math.max(seen, end);
        });
        child.on('error', reject);
        child.on('exit', (code) => {
          if (code === 0 && threadId) resolve(threadId);
          else reject(new Error(`codex exec exited ${code}: ${out.slice(-500)}`));
        });
      });
    },
    daemonPid,
    stopDaemon,
    async close() {
      await stopDaemon();
      await fake.close();
      await tripwire.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * Points the home's daemon package at the installed CLI's platform package, as a pinned
 * selection: without it the first `daemon start` copies that package (about 420 MB) into every
 * fresh test home. Codex runs a selected package in place.
 */
function pinDaemonPackage(codexHome: string): void {
  const scope = join(agentClisDir(), 'node_modules', '@openai');
  const platform = existsSync(scope)
    ? readdirSync(scope).find((d) => d.startsWith('codex-') && existsSync(join(scope, d, 'vendor')))
    : undefined;
  if (!platform) return;
  const vendor = join(scope, platform, 'vendor');
  const target = readdirSync(vendor).find((d) => existsSync(join(vendor, d, 'codex-package.json')));
  if (!target) return;
  mkdirSync(join(codexHome, 'packages', 'app-server-daemon'), { recursive: true });
  symlinkSync(join(vendor, target), join(codexHome, 'packages', 'app-server-daemon', 'current'));
}

/** Alive and not a zombie (a daemon orphaned to a pid 1 that does not reap stays one). */
function isRunning(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

function expectGone(pid: number): void {
  if (isRunning(pid)) throw new Error(`process ${pid} is still running`);
}
