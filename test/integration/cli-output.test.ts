import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../services/cli/program.ts';
import { runBaton, spawnBaton } from '../support/spawn-baton.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { scratchDir } from '../support/scratch-dir.ts';

let baton: TestBaton;
let env: Record<string, string>;

async function cli(envOf: Record<string, string>, ...argv: string[]) {
  let out = '';
  let err = '';
  const code = await runCli(argv, envOf, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err };
}

beforeAll(async () => {
  baton = await startTestBaton();
  env = { BATON_URL: await baton.listen(), BATON_TOKEN: baton.adminToken, BATON_HOME: scratchDir('baton-cli-out-') };
});

afterAll(async () => {
  await baton?.stop();
});

describe('CLI output', () => {
  it("prints package.json's version with --version, from the compiled build", async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    const run = await runBaton(['--version'], {});
    expect(run).toEqual({ code: 0, output: `${version}\n` });
  });

  it('with --json, prints an API refusal as {"error":{code,message}} on stderr and nothing on stdout', async () => {
    const r = await cli(env, 'show', '01a22c4d-1682-71c6-9a22-ab1910b13f20', '--json');
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(JSON.parse(r.err)).toEqual({ error: { code: 'handoff_not_found', message: expect.any(String) } });
  });

  it('with --json, prints usage errors, configuration errors and an unreachable API as JSON errors too', async () => {
    const usage = await cli(env, 'show', '--json', '--bogus');
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.err)).toEqual({ error: { code: 'usage_error', message: "unknown option '--bogus'" } });
    const config = await cli({ ...env, BATON_URL: 'ftp://x' }, 'status', '--json');
    expect(config.code).toBe(2);
    expect(JSON.parse(config.err).error).toMatchObject({ code: 'invalid_configuration', message: expect.stringContaining('BATON_URL') });
    const unreachable = await cli({ ...env, BATON_URL: 'http://127.0.0.1:1' }, 'whoami', '--json');
    expect(unreachable.code).toBe(1);
    expect(JSON.parse(unreachable.err).error.code).toBe('api_unreachable');
  });

  it('without --json, errors stay one line of text', async () => {
    const r = await cli(env, 'show', '01a22c4d-1682-71c6-9a22-ab1910b13f20');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^error: handoff_not_found: .+\n$/);
  });

  it('mcp config --json prints the snippet with what it is for; demo-host --json prints its URL as JSON', async () => {
    expect((await baton.post('/v1/agents', { id: 'scribe', provider: 'manual' })).status).toBe(201);
    const token = await baton.tokenFor('scribe');
    const r = await cli({ ...env, BATON_TOKEN: token }, 'mcp', 'config', '--client', 'claude', '--json');
    expect(r.code, r.err).toBe(0);
    const shown = JSON.parse(r.out);
    expect(shown).toMatchObject({ client: 'claude', transport: 'stdio', agent: 'scribe', holdsToken: true });
    expect(JSON.parse(shown.snippet).mcpServers.baton.args.at(-1)).toBe('mcp');

    const host = spawnBaton(['demo-host', '--json'], {});
    try {
      const line = await eventually(() => {
        const out = host.output();
        const start = out.indexOf('{');
        const end = out.indexOf('}', start);
        if (start < 0 || end < 0) throw new Error('no JSON yet');
        return out.slice(start, end + 1);
      }, { what: 'the demo host start line', timeoutMs: 15_000 });
      expect(JSON.parse(line)).toEqual({ url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/) });
    } finally {
      await host.stop('SIGTERM');
    }
  });
});

