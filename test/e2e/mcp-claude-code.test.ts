import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentCli } from '../support/agent-clis.ts';
import { anthropicProtocol } from '../support/fake-models/anthropic.ts';
import { startEgressTripwire, type EgressTripwire } from '../support/fake-models/egress-tripwire.ts';
import { startFakeModelServer, type FakeModelServer } from '../support/fake-models/fake-model-server.ts';
import { runBaton } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { eventually } from '../support/eventually.ts';

/**
 * Issue 13's proof with the real program: the real Claude Code CLI loads `baton mcp` from the
 * exact snippet `baton mcp config --client claude` printed, a loopback fake model asks for
 * Baton's send tool, and the handoff it creates is stored under the token's agent and
 * delivered by Baton. Nothing leaves the machine (a refusing proxy records any attempt).
 */
let baton: TestBaton;
let apiUrl: string;
let fake: FakeModelServer;
let tripwire: EgressTripwire;
let root: string;

beforeAll(async () => {
  baton = await startTestBaton();
  apiUrl = await baton.listen();
  fake = await startFakeModelServer([anthropicProtocol]);
  tripwire = await startEgressTripwire();
  root = mkdtempSync(join(tmpdir(), 'baton-mcp-claude-'));
  expect((await baton.post('/v1/agents', { id: 'writer', provider: 'manual' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'reviewer', provider: 'demo', settings: { thinkMs: 20 } })).status).toBe(201);
  baton.startWorker();
}, 60_000);

afterAll(async () => {
  await baton?.stop();
  await fake?.close();
  await tripwire?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

function runClaude(args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(agentCli('claude'), args, {
    cwd,
    // Stdin ignored: an open pipe makes the CLI wait 3 s (recipe 1.9).
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env['PATH'] ?? '',
      HOME: join(root, 'home'),
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: 'fake',
      CLAUDE_CONFIG_DIR: join(root, 'claude-config'),
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      CLAUDE_CODE_MAX_RETRIES: '0',
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
      // `claude -p` connects MCP servers in the background and sends its first model request
      // without waiting for them; a one-shot headless run must ask it to wait (documented in
      // the README's MCP section).
      MCP_CONNECTION_NONBLOCKING: '0',
      ...tripwire.env(),
    },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) => {
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('the real Claude Code CLI with Baton as its MCP server', () => {
  it('loads `baton mcp` from the printed snippet, calls send for the fake model, and Baton delivers the handoff', async () => {
    const token = await baton.tokenFor('writer');
    const printed = await runBaton(['mcp', 'config', '--client', 'claude'], { BATON_URL: apiUrl, BATON_TOKEN: token });
    expect(printed.code, printed.output).toBe(0);
    const snippet = JSON.parse(printed.output.slice(printed.output.indexOf('{'), printed.output.lastIndexOf('}') + 1));
    expect(Object.keys(snippet.mcpServers)).toEqual(['baton']);
    const configFile = join(root, 'mcp.json');
    writeFileSync(configFile, JSON.stringify(snippet));
    mkdirSync(join(root, 'home'), { recursive: true });
    const workdir = join(root, 'work');
    mkdirSync(workdir, { recursive: true });

    // The fake model: call Baton's send tool once the CLI offers it, then report the result.
    fake.script((exchange) => {
      const offered = ((exchange.body as { tools?: Array<{ name?: string }> }).tools ?? []).some((t) => t.name === 'mcp__baton__send');
      const messages = (exchange.body as { messages?: Array<{ role: string; content: unknown }> }).messages ?? [];
      const answered = messages.some(
        (m) => Array.isArray(m.content) && m.content.some((b: { type?: string }) => b?.type === 'tool_result'),
      );
      if (offered && !answered) {
        return {
          kind: 'tool_use',
          name: 'mcp__baton__send',
          input: { to: 'reviewer', title: 'Review the login form', message: 'Please review the login form before release.' },
        };
      }
      return { kind: 'reply', text: answered ? `Handed off. ${exchange.prompt.slice(0, 200)}` : 'the send tool was not offered' };
    });

    const run = await runClaude(
      [
        '-p',
        'Hand the login form review to the reviewer.',
        '--mcp-config',
        configFile,
        '--strict-mcp-config',
        '--allowedTools',
        'mcp__baton__send',
        '--output-format',
        'stream-json',
        '--verbose',
      ],
      workdir,
    );
    const lines = run.stdout
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const init = lines.find((l) => l['type'] === 'system' && l['subtype'] === 'init') as
      { mcp_servers?: Array<{ name: string; status: string }> } | undefined;
    // The server may still be starting when the CLI reports init ("pending"); it must not have failed.
    expect(
      init?.mcp_servers?.map((s) => s.name),
      run.stderr,
    ).toContain('baton');
    expect(init?.mcp_servers?.find((s) => s.name === 'baton')?.status).not.toBe('failed');
    const result = lines.find((l) => l['type'] === 'result') as
      { is_error?: boolean; result?: string; permission_denials?: unknown[] } | undefined;
    expect(result?.is_error, JSON.stringify(result)).toBe(false);
    expect(result?.permission_denials).toEqual([]);
    expect(run.code).toBe(0);
    // The tool's answer reached the model: the last request carried Baton's result.
    expect(fake.exchanges.length).toBeGreaterThanOrEqual(2);
    expect(fake.exchanges.at(-1)!.allText, fake.exchanges.at(-1)!.allText.slice(-1500)).toMatch(
      /"from":"writer","to":"reviewer","toRole":null,"routedAt":null,"title":"Review the login form"/,
    );

    // Stored under the token's agent, and delivered by Baton as a turn of the reviewer.
    const listed = await baton.get('/v1/handoffs?all_owners=true');
    const created = listed.body.items.filter((h: { title: string }) => h.title === 'Review the login form');
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({ from: 'writer', to: 'reviewer' });
    await eventually(async () => expect((await baton.get(`/v1/handoffs/${created[0].id}?all_owners=true`)).body.state).toBe('RETURNED'), {
      what: 'the handoff delivered',
    });
    expect(tripwire.attempts).toEqual([]);
  }, 120_000);
});
