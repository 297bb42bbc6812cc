import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inheritedEnv } from '../../libs/adapters/command/create-command-adapter.ts';
import { agentCli } from './agent-clis.ts';
import { startEgressTripwire, type EgressTripwire } from './fake-models/egress-tripwire.ts';
import { anthropicProtocol } from './fake-models/anthropic.ts';
import { startFakeModelServer, type FakeBehaviour, type FakeExchange, type FakeModelServer } from './fake-models/fake-model-server.ts';
import { scratchDir } from './scratch-dir.ts';

/**
 * The real `claude` CLI (pinned; scripts/install-agent-clis.sh) wired to the fake Anthropic server
 * on loopback behind the refusing egress tripwire (recipe 1.1): one config directory (logins,
 * transcripts, `sessions/`), a working directory and an API key per agent handle, and each
 * agent's model requests answered by the script set for its key.
 */
export interface ClaudeCodeFixture {
  readonly binary: string;
  readonly root: string;
  readonly configDir: string;
  readonly runDir: string;
  readonly fake: FakeModelServer;
  readonly tripwire: EgressTripwire;
  /** How the fake answers the model requests of `handle` (default: "done: <first line>"). */
  script(handle: string, choose: (exchange: FakeExchange) => FakeBehaviour): void;
  /** Claude Code settings of `handle` (its own cwd and API key), with `extra` over them. */
  settings(handle: string, extra?: Record<string, unknown>): ClaudeSettings;
  /** The model requests `handle`'s claude processes made, in order. */
  requestsOf(handle: string): FakeExchange[];
  /** A person's own `claude -p <prompt>` in the agent's cwd (`--resume <session>` or, with `create`, `--session-id`), outside Baton. */
  personsClaude(handle: string, prompt: string, session: { resume?: string; create?: string }, env?: Record<string, string>): ChildProcess;
  /** Runs a person's turn to its end (creating the session). */
  personsTurn(handle: string, prompt: string, session: { resume?: string; create?: string }): Promise<void>;
  /** The user prompts of a transcript, in order, as Claude Code recorded them. */
  transcriptPrompts(path: string): string[];
  /** The transcript's lines, parsed. */
  transcriptLines(path: string): TranscriptLine[];
  close(): Promise<void>;
}

export interface ClaudeSettings {
  readonly cwd: string;
  readonly binary: string;
  readonly configDir: string;
  readonly apiKey: string;
  readonly env: Record<string, string>;
  readonly timeoutMs: number;
  readonly [key: string]: unknown;
}

export interface TranscriptLine {
  readonly type?: string;
  readonly message?: { readonly content?: unknown };
  readonly [key: string]: unknown;
}

/** The turn a model request belongs to: the last marker of its prompt. */
export const markerOf = (ex: FakeExchange): string | null => [...ex.prompt.matchAll(/^baton-request-id: (\S+)\s*$/gm)].at(-1)?.[1] ?? null;

/** A promise a test settles when it wants a held model reply to go out. */
export function hold(): { release: () => void; until: Promise<void> } {
  let release = () => undefined as void;
  const until = new Promise<void>((resolve) => (release = resolve));
  return { release, until };
}

export async function startClaudeCodeFixture(prefix: string): Promise<ClaudeCodeFixture> {
  const binary = agentCli('claude');
  const root = scratchDir(prefix);
  const configDir = join(root, 'claude-config');
  const home = join(root, 'home');
  mkdirSync(home, { recursive: true });
  const fake = await startFakeModelServer([anthropicProtocol]);
  const tripwire = await startEgressTripwire();
  const scripts = new Map<string, (ex: FakeExchange) => FakeBehaviour>();
  fake.script(
    (ex) => scripts.get(String(ex.headers['x-api-key']))?.(ex) ?? { kind: 'reply', text: `done: ${ex.prompt.split('\n')[0] ?? ''}` },
  );

  const settings = (handle: string, extra: Record<string, unknown> = {}): ClaudeSettings => {
    const cwd = join(root, 'work', handle);
    mkdirSync(cwd, { recursive: true });
    return {
      cwd,
      binary,
      configDir,
      apiKey: `key-${handle}`,
      env: { ANTHROPIC_BASE_URL: fake.url, CLAUDE_CODE_MAX_RETRIES: '0', HOME: home, ...tripwire.env() },
      timeoutMs: 120_000,
      ...extra,
    };
  };
  const personsClaude = (
    handle: string,
    prompt: string,
    session: { resume?: string; create?: string },
    env: Record<string, string> = {},
  ) => {
    const s = settings(handle);
    const which = session.resume ? ['--resume', session.resume] : ['--session-id', session.create as string];
    return spawn(binary, ['-p', prompt, ...which, '--output-format', 'json'], {
      cwd: s.cwd,
      env: {
        ...inheritedEnv(process.env),
        ...s.env,
        CLAUDE_CONFIG_DIR: configDir,
        ANTHROPIC_API_KEY: s.apiKey,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  };
  const transcriptLines = (path: string) =>
    readFileSync(path, 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as TranscriptLine);
  return {
    binary,
    root,
    configDir,
    runDir: join(root, 'runs'),
    fake,
    tripwire,
    script: (handle, choose) => scripts.set(`key-${handle}`, choose),
    settings,
    requestsOf: (handle) => fake.exchanges.filter((ex) => ex.headers['x-api-key'] === `key-${handle}`),
    personsClaude,
    async personsTurn(handle, prompt, session) {
      const child = personsClaude(handle, prompt, session);
      let stderr = '';
      child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      if (code !== 0) throw new Error(`the person's claude exited with ${code}: ${stderr}`);
    },
    transcriptLines,
    transcriptPrompts: (path) =>
      transcriptLines(path)
        .filter((l) => l.type === 'user' && typeof l.message?.content === 'string')
        .map((l) => l.message?.content as string),
    async close() {
      await fake.close();
      await tripwire.close();
    },
  };
}
