import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureCli } from '../support/capture-cli.ts';
import { runBaton, spawnBaton } from '../support/spawn-baton.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { scratchDir } from '../support/scratch-dir.ts';

let baton: TestBaton;
let env: Record<string, string>;

async function cli(envOf: Record<string, string>, ...argv: string[]) {
  return captureCli(envOf, argv);
}

beforeAll(async () => {
  baton = await startTestBaton();
  baton.startWorker();
  env = { BATON_URL: await baton.listen(), BATON_TOKEN: baton.adminToken, BATON_HOME: scratchDir('baton-cli-out-') };
});

/** Runs the CLI as an agent, with that agent's own token. */
const asAgent = async (agent: string, ...argv: string[]) => cli({ ...env, BATON_TOKEN: await baton.tokenFor(agent) }, ...argv);

/** The text of a table's column `header` in the row that starts with `first` (headers and cells share their start). */
function cellOf(table: string, first: string, header: string): string {
  const lines = table.split('\n');
  const head = lines.find((l) => l.startsWith('ID '));
  const row = lines.find((l) => l.startsWith(first));
  if (!head || !row) throw new Error(`no header or no row ${first} in:\n${table}`);
  const start = head.indexOf(header);
  const next = head.slice(start + header.length).search(/\S/);
  const end = next < 0 ? undefined : start + header.length + next;
  return row.slice(start, end).trim();
}

/** No ISO 8601 time (`2026-12-02T01:02:03.456Z`) in text meant for people. */
const ISO_TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d/;
const LOCAL_TIME = /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/;

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
      const line = await eventually(
        () => {
          const out = host.output();
          const start = out.indexOf('{');
          const end = out.indexOf('}', start);
          if (start < 0 || end < 0) throw new Error('no JSON yet');
          return out.slice(start, end + 1);
        },
        { what: 'the demo host start line', timeoutMs: 15_000 },
      );
      expect(JSON.parse(line)).toEqual({ url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/) });
    } finally {
      await host.stop('SIGTERM');
    }
  });
});

describe('what an admin sees (issue 31, item 6)', () => {
  it("an admin token's list, status, show and watch show every owner's handoffs, as the live page does; --no-all-owners says how many it hides", async () => {
    for (const id of ['ann', 'bob']) expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
    const sent = await asAgent('ann', 'send', 'bob', 'between ann and bob', '--title', 'Owned work', '--json');
    const h = JSON.parse(sent.out);

    const list = await cli(env, 'list');
    expect(list.code, list.err).toBe(0);
    expect(cellOf(list.out, h.id, 'TITLE')).toBe('Owned work');
    const status = await cli(env, 'status');
    expect(status.out).toMatch(/^project default: \d+ handoffs \(all owners\)$/m);
    expect(status.out).toMatch(/^ {2}WAITING +[1-9]/m);
    expect((await cli(env, 'show', h.id)).out).toContain(`handoff ${h.id}`);
    // watch follows the owned handoff too (it never settles: a manual agent), until its timeout.
    const watched = await cli(env, 'watch', h.id, '--timeout', '1');
    expect(watched.code).toBe(7);
    expect(watched.out).toContain(`${h.id}  - -> WAITING`);

    // The API's own default view, asked for: the handoff is hidden, and the admin is told how many are.
    const narrow = await cli(env, 'list', '--no-all-owners');
    expect(narrow.out).not.toContain(h.id);
    const hidden = JSON.parse((await cli(env, 'status', '--no-all-owners', '--json')).out);
    const all = JSON.parse((await cli(env, 'status', '--json')).out);
    expect(all.hidden, 'an all-owners view hides nothing').toBeUndefined();
    expect(hidden.hidden).toBe(all.total - hidden.total);
    expect(hidden.hidden).toBeGreaterThan(0);
    const note = `${hidden.hidden} handoff${hidden.hidden === 1 ? '' : 's'} you may not see without --all-owners\n`;
    expect(narrow.err).toBe(note);
    expect((await cli(env, 'status', '--no-all-owners')).err).toBe(note);
    expect((await cli(env, 'show', h.id, '--no-all-owners')).err).toContain('handoff_not_found');

    // An agent is never told how much it may not see (libs/domain/visibility.ts).
    const carol = await baton.post('/v1/agents', { id: 'carol', provider: 'manual' });
    expect(carol.status).toBe(201);
    const theirs = await asAgent('carol', 'status', '--json');
    expect(JSON.parse(theirs.out).hidden).toBeUndefined();
    expect((await asAgent('carol', 'list')).err).toBe('');
  });
});

describe('send --wait and the context packet (issue 31, item 7)', () => {
  it('send --wait prints the outcome with its result summary, as show does', async () => {
    expect((await baton.post('/v1/agents', { id: 'doer', provider: 'demo', settings: { thinkMs: 20 } })).status).toBe(201);
    expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
    const r = await cli(env, 'send', 'lead', 'doer', 'Do the work', '--title', 'Waited on', '--wait', '--timeout', '60');
    expect(r.code, r.err).toBe(0);
    const id = /^RETURNED: (\S+) /.exec(r.out)?.[1];
    expect(id, r.out).toBeDefined();
    const h = JSON.parse((await cli(env, 'show', id!, '--json')).out);
    expect(h.result.summary, 'the demo agent returns a summary').toEqual(expect.any(String));
    expect(r.out).toContain(`\n  state    RETURNED\n`);
    expect(r.out).toContain(`\n  result   ${h.result.summary}\n`);
    expect((await cli(env, 'show', id!)).out).toContain(`\n  result   ${h.result.summary}\n`);
  });

  it('an empty context packet prints nothing, not an empty fenced block; a packet with context prints whole', async () => {
    const bare = JSON.parse((await asAgent('ann', 'send', 'bob', 'no context at all', '--title', 'Bare', '--json')).out);
    const read = await asAgent('bob', 'read', bare.id);
    expect(read.code, read.err).toBe(0);
    expect(read.out).toContain(`handoff ${bare.id}`);
    expect(read.out).not.toContain('~~~');
    const accepted = await asAgent('bob', 'accept', bare.id);
    expect(accepted.out).toMatch(/^claimed: /);
    expect(accepted.out).not.toContain('~~~');
    expect(accepted.out.trimEnd().split('\n')).toHaveLength(2);

    const rich = JSON.parse(
      (await asAgent('ann', 'send', 'bob', 'with context', '--title', 'Rich', '--summary', 'half done', '--json')).out,
    );
    const full = await asAgent('bob', 'read', rich.id);
    expect(full.out).toContain('~~~\nSummary: half done\n~~~');
  });
});

describe('tables, names and times (issue 31, item 8)', () => {
  it('list, agent list, token list, session list and show, project list and audit print one header row with aligned columns', async () => {
    const list = await cli(env, 'list');
    expect(list.out.split('\n')[0]).toMatch(/^ID +STATE +FROM +TO +SENT +TITLE$/);
    const agents = await cli(env, 'agent', 'list');
    expect(agents.out.split('\n')[0]).toMatch(/^ID +PROVIDER +NAME +TARGET +POOL +ROLES +ADDED$/);
    expect(cellOf(agents.out, 'doer ', 'PROVIDER')).toBe('demo');
    const tokens = await cli(env, 'token', 'list');
    expect(tokens.out.split('\n')[0]).toMatch(/^ID +FOR +NAME +CREATED +LAST USED +REVOKED$/);
    const projects = await cli(env, 'project', 'list');
    expect(projects.out.split('\n')[0]).toMatch(/^ID +NAME$/);

    const session = JSON.parse((await asAgent('ann', 'session', 'new', 'A tracked task', '--json')).out);
    await asAgent('ann', 'fact', 'add', session.id, 'decision', 'use Postgres');
    await asAgent('ann', 'send', 'bob', 'in the session', '--session', session.id);
    const sessions = await cli(env, 'session', 'list');
    expect(sessions.code, sessions.err).toBe(0);
    expect(sessions.out.split('\n')[0]).toMatch(/^ID +STARTED +FACTS +HANDOFFS +TITLE$/);
    expect(cellOf(sessions.out, session.id, 'FACTS')).toBe('1');
    expect(cellOf(sessions.out, session.id, 'HANDOFFS')).toBe('1');
    expect(cellOf(sessions.out, session.id, 'TITLE')).toBe('A tracked task');
    const shown = (await cli(env, 'session', 'show', session.id)).out;
    expect(shown).toMatch(
      /\nfacts \(1\)\nID +KIND +BY +ADDED +SUPERSEDED BY +TEXT\n\S+ +decision +ann +(just now|\d+ s ago) +use Postgres\n/,
    );
    expect(shown).toMatch(/\nhandoffs \(1\)\nID +STATE +FROM +TO +SENT +TITLE\n\S+ +WAITING +ann +bob +/);
    // An agent sees the project's sessions, and counts only the handoffs it may see.
    const carols = await asAgent('carol', 'session', 'list', '--json');
    expect(JSON.parse(carols.out).find((s: { id: string }) => s.id === session.id)).toMatchObject({ facts: 1, handoffs: 0 });
  });

  it('token list names a token once (its default name is its holder) and audit names tokens, not ids', async () => {
    const made = JSON.parse((await cli(env, 'token', 'create', '--agent', 'bob', '--json')).out);
    const labelled = JSON.parse((await cli(env, 'token', 'create', '--agent', 'bob', '--name', 'bob laptop', '--json')).out);
    const tokens = await cli(env, 'token', 'list');
    expect(tokens.out).not.toMatch(/bob@default +bob@default/);
    expect(cellOf(tokens.out, made.record.id, 'FOR')).toBe('bob@default');
    expect(cellOf(tokens.out, made.record.id, 'NAME')).toBe('');
    expect(cellOf(tokens.out, labelled.record.id, 'NAME')).toBe('bob laptop');
    expect(cellOf(tokens.out, made.record.id, 'LAST USED')).toBe('never');

    const me = JSON.parse((await cli(env, 'whoami', '--json')).out);
    const admin = (JSON.parse((await cli(env, 'token', 'list', '--all', '--json')).out) as Array<{ id: string; name: string }>).find(
      (t) => t.id === me.tokenId,
    )!;
    const audit = await cli(env, 'audit', '--limit', '3');
    expect(audit.code, audit.err).toBe(0);
    const lines = audit.out.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^WHEN +TOKEN +METHOD +ROUTE +STATUS +PROJECT +PARAMS$/);
    expect(lines).toHaveLength(4);
    expect(audit.out).not.toContain(me.tokenId);
    expect(lines[1]).toMatch(new RegExp(`^${LOCAL_TIME.source} +${admin.name.replace(/[()]/g, '\\$&')} +POST +/v1/tokens`));
  });

  it('baton agent show prints one agent; an unknown one is agent_not_found', async () => {
    const shown = await cli(env, 'agent', 'show', 'DOER');
    expect(shown.code, shown.err).toBe(0);
    expect(shown.out).toMatch(/^agent doer\n/);
    expect(shown.out).toContain('\n  provider    demo\n');
    expect(shown.out).toContain('\n  settings    {"thinkMs":20}\n');
    expect(shown.out).toMatch(new RegExp(`\n  added       ${LOCAL_TIME.source} \\(`));
    const missing = await cli(env, 'agent', 'show', 'nobody');
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('agent_not_found');
  });

  it('times read one way for people (local, relative in tables) and stay ISO 8601 in --json', async () => {
    const h = JSON.parse((await asAgent('ann', 'send', 'bob', 'timed', '--title', 'Timed', '--due-minutes', '30', '--json')).out);
    const shown = (await cli(env, 'show', h.id)).out;
    expect(shown).toMatch(new RegExp(`sent ${LOCAL_TIME.source} \\((just now|\\d+ s ago)\\)`));
    expect(shown).toMatch(new RegExp(`due      ${LOCAL_TIME.source} \\(in (29|30) min\\)`));
    expect(shown).toMatch(new RegExp(`\n    ${LOCAL_TIME.source}  - +-> WAITING`));
    expect(cellOf((await cli(env, 'list')).out, h.id, 'SENT')).toMatch(/^(just now|\d+ s ago)$/);
    for (const argv of [
      ['show', h.id],
      ['list'],
      ['token', 'list'],
      ['audit', '--limit', '5'],
      ['agent', 'show', 'bob'],
      ['agent', 'list'],
      ['session', 'list'],
      ['watch', h.id, '--timeout', '1'],
    ]) {
      const r = await cli(env, ...argv);
      expect(r.out, argv.join(' ')).not.toMatch(ISO_TIME);
    }
    expect(JSON.parse((await cli(env, 'show', h.id, '--json')).out).createdAt).toBe(h.createdAt);
    expect(h.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("a mistyped command gets commander's suggestion and one line on where to look, not the whole help", async () => {
    const r = await cli(env, 'sned', 'bob', 'hi');
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err).toBe(`error: unknown command 'sned'\n(Did you mean send?)\n(see "baton --help" for the commands)\n`);
    const sub = await cli(env, 'send');
    expect(sub.code).toBe(2);
    expect(sub.err).toBe(`error: missing required argument 'from-or-to'\n(see "baton send --help" for its usage)\n`);
  });
});
