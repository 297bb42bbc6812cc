import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../services/cli/program.ts';
import { runBaton, spawnBaton } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { scratchDir } from '../support/scratch-dir.ts';

/**
 * What a new user meets in the CLI (issue 10, item 14, and the CLI half of item 5): an admin
 * seeing owned handoffs, long text from files and stdin, heartbeat finding its claim, --json
 * everywhere, `baton audit`, a closed pipe, and sends that are safe to repeat.
 */
let baton: TestBaton;
let apiUrl: string;
let env: Record<string, string>;
const tokens: Record<string, string> = {};

/** Runs the CLI in this process as `who` (an agent's token, or the admin's), with `stdin` piped in if given. */
async function cli(who: string, argv: string[], stdin?: string) {
  let out = '';
  let err = '';
  const code = await runCli(
    argv,
    { ...env, BATON_TOKEN: tokens[who] ?? baton.adminToken },
    {
      out: (s) => void (out += s),
      err: (s) => void (err += s),
      ...(stdin === undefined ? {} : { stdin: async () => stdin }),
    },
  );
  return { code, out, err };
}
async function json(who: string, ...argv: string[]) {
  const r = await cli(who, [...argv, '--json']);
  if (r.code !== 0) throw new Error(`baton ${argv.join(' ')} (as ${who}) exited ${r.code}: ${r.err}`);
  return JSON.parse(r.out);
}
const count = async (message: string) =>
  (await baton.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM handoffs WHERE message = $1', [message])).rows[0]!.n;

beforeAll(async () => {
  baton = await startTestBaton();
  apiUrl = await baton.listen();
  env = { BATON_URL: apiUrl, BATON_HOME: scratchDir('baton-cli-use-') };
  for (const a of ['ann', 'bob', 'cat']) {
    expect((await cli('admin', ['agent', 'add', a, '--provider', 'manual'])).code).toBe(0);
    tokens[a] = (await json('admin', 'token', 'create', '--agent', a)).token;
  }
});

afterAll(async () => {
  await baton?.stop();
});

describe('an admin and owned handoffs', () => {
  it("sees another agent's owned handoff with --all-owners on list, show, read, status, board, inbox, outbox and session show", async () => {
    const session = await json('ann', 'session', 'new', 'Private work');
    const h = await json('ann', 'send', 'bob', 'owned by ann and bob', '--title', 'Owned', '--session', session.id);
    expect((await cli('admin', ['show', h.id, '--no-all-owners'])).err, 'with --no-all-owners it stays hidden').toContain(
      'handoff_not_found',
    );
    expect((await cli('admin', ['list', '--no-all-owners'])).out).not.toContain(h.id);

    expect((await json('admin', 'list', '--all-owners')).items.map((i: { id: string }) => i.id)).toContain(h.id);
    expect((await json('admin', 'show', h.id, '--all-owners')).id).toBe(h.id);
    expect((await cli('admin', ['read', h.id, '--as', 'bob', '--all-owners'])).out).toContain('owned by ann and bob');
    expect((await json('admin', 'status', '--all-owners')).total).toBeGreaterThan((await json('admin', 'status', '--no-all-owners')).total);
    expect(JSON.stringify(await json('admin', 'board', '--all-owners'))).toContain(h.id);
    expect(JSON.stringify(await json('admin', 'inbox', 'bob', '--all-owners'))).toContain(h.id);
    expect(JSON.stringify(await json('admin', 'outbox', 'ann', '--all-owners'))).toContain(h.id);
    expect(JSON.stringify(await json('admin', 'session', 'show', session.id, '--all-owners'))).toContain(h.id);
    // An admin token's default is every owner's handoffs, as on the live page (issue 31, item 6).
    expect((await json('admin', 'show', h.id)).id).toBe(h.id);
    expect((await json('admin', 'list')).items.map((i: { id: string }) => i.id)).toContain(h.id);
    expect(JSON.stringify(await json('admin', 'board'))).toContain(h.id);
    expect(JSON.stringify(await json('admin', 'inbox', 'bob'))).toContain(h.id);
    expect(JSON.stringify(await json('admin', 'outbox', 'ann'))).toContain(h.id);
    expect(JSON.stringify(await json('admin', 'session', 'show', session.id))).toContain(h.id);
    expect((await cli('admin', ['read', h.id, '--as', 'bob'])).out).toContain('owned by ann and bob');
  });
});

describe('long text', () => {
  it('send takes its message from --file, from "-" (stdin) and from piped stdin; return and fact add too', async () => {
    const long = `${'A long brief, line after line.\n'.repeat(400)}the end`;
    const file = join(env['BATON_HOME']!, 'brief.txt');
    writeFileSync(file, `${long}\n`);

    const fromFile = await json('ann', 'send', 'bob', '--file', file, '--title', 'From a file');
    expect(fromFile.message, 'the file, without its final newline').toBe(long);
    const withFrom = await json('ann', 'send', 'ann', 'bob', '--file', file);
    expect(withFrom).toMatchObject({ from: 'ann', to: 'bob', message: long });

    const dash = await cli('ann', ['send', 'bob', '-', '--json'], 'piped with a dash\n');
    expect(JSON.parse(dash.out).message).toBe('piped with a dash');
    const piped = await cli('ann', ['send', 'bob', '--title', 'Piped', '--json'], 'piped, no argument\n');
    expect(JSON.parse(piped.out).message).toBe('piped, no argument');

    const nothing = await cli('ann', ['send', 'bob']);
    expect(nothing.code, 'no message anywhere is a usage error').toBe(2);
    expect(nothing.err).toMatch(/the message is missing/);
    expect((await cli('ann', ['send', 'ann', 'bob', 'both', '--file', file])).code, 'a message argument and --file').toBe(2);

    // As a real process: the shell pipes the message in.
    const real = await runBaton(['send', 'bob', '--json'], { ...env, BATON_TOKEN: tokens['ann']! }, 30_000, 'from a real pipe\n');
    expect(real.code, real.output).toBe(0);
    expect(real.output).toContain('"message": "from a real pipe"');

    const session = await json('bob', 'session', 'new', 'Notes');
    const fact = await cli('bob', ['fact', 'add', session.id, 'lesson', '--json'], 'a lesson from stdin\n');
    expect(JSON.parse(fact.out).text).toBe('a lesson from stdin');
    const note = join(env['BATON_HOME']!, 'note.txt');
    writeFileSync(note, 'a fact\nover two lines\n');
    expect((await json('bob', 'fact', 'add', session.id, 'note', '--file', note)).text).toBe('a fact\nover two lines');

    await json('bob', 'accept', fromFile.id);
    const returned = await cli('bob', ['return', fromFile.id, '--summary', '-', '--json'], 'done, summary from stdin\n');
    expect(returned.code, returned.err).toBe(0);
    expect(JSON.parse(returned.out).handoff.result.summary).toBe('done, summary from stdin');
  });
});

describe('heartbeat and --json', () => {
  it('heartbeat finds the claim itself, as return does, prints JSON, and never claims work it does not hold', async () => {
    const h = await json('ann', 'send', 'bob', 'keep me alive', '--title', 'Heartbeat');
    const refused = await cli('bob', ['heartbeat', h.id]);
    expect(refused.code, 'no claim yet: refused').toBe(1);
    expect(refused.err).toContain('claim_lost');
    expect((await json('bob', 'show', h.id)).work.state, 'heartbeat claimed nothing').toBe('open');

    const claim = await json('bob', 'accept', h.id);
    const beat = await json('bob', 'heartbeat', h.id, '--lease', '600');
    expect(Date.parse(beat.leaseExpiresAt)).toBeGreaterThan(Date.parse(claim.claim.leaseExpiresAt));
    const asAdmin = await json('admin', 'heartbeat', h.id, '--as', 'bob');
    expect(asAdmin.leaseExpiresAt).toMatch(/^\d{4}-/);
  });

  it('allow, block, agent remove, token revoke and project create print JSON with --json', async () => {
    expect((await json('admin', 'block', 'ann', 'cat')).items).toEqual(
      expect.arrayContaining([expect.objectContaining({ from: 'ann', to: 'cat', rule: 'block' })]),
    );
    expect((await json('admin', 'allow', 'ann', 'cat')).items).toEqual(
      expect.arrayContaining([expect.objectContaining({ from: 'ann', to: 'cat', rule: 'allow' })]),
    );
    expect(await json('admin', 'project', 'create', 'side-project')).toMatchObject({ id: 'side-project' });
    const created = await json('admin', 'token', 'create', '--agent', 'cat');
    expect(await json('admin', 'token', 'revoke', created.record.id)).toEqual({ revoked: created.record.id });
    expect((await cli('admin', ['agent', 'add', 'gone'])).code).toBe(0);
    expect(await json('admin', 'agent', 'remove', 'gone')).toEqual({ removed: 'gone' });
  });

  it('baton audit lists who changed what (admin), as text and as JSON', async () => {
    const items = await json('admin', 'audit', '--limit', '200');
    expect(items.some((a: { method: string; route: string }) => a.method === 'POST' && a.route.includes('/v1/agents'))).toBe(true);
    const text = await cli('admin', ['audit', '--limit', '5']);
    expect(text.code).toBe(0);
    expect(text.out.trim().split('\n'), 'a header and five entries').toHaveLength(6);
    expect((await cli('ann', ['audit'])).err, 'an agent token may not read it').toContain('forbidden');
  });
});

describe('output to a closed pipe', () => {
  it('`baton board | head`: a reader that went away ends the command quietly, exit 0, no EPIPE stack', async () => {
    const p = spawnBaton(['board'], { ...env, BATON_TOKEN: baton.adminToken });
    // The reader goes away before the board is printed, as `head` does after its lines.
    p.child.stdout?.destroy();
    const code = await p.exited();
    expect(p.output(), 'nothing on stderr').not.toMatch(/EPIPE|Error/);
    expect(code).toBe(0);
  });
});

/**
 * An HTTP front for the API that spoils the first POST /v1/handoffs: `lose-reply` forwards it
 * (the handoff is stored) and then drops the connection before the answer; `unavailable`
 * answers 503 database_unavailable without forwarding. Everything else passes through.
 */
async function faultyFront(fault: 'lose-reply' | 'unavailable') {
  const seen: Array<string | undefined> = [];
  let spoiled = false;
  const server = http.createServer((req, res) => void relay(req, res).catch((err: unknown) => res.destroy(err as Error)));
  const relay = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const isSend = req.method === 'POST' && req.url === '/v1/handoffs';
    if (isSend) seen.push(JSON.parse(body.toString('utf8')).idempotencyKey);
    if (isSend && !spoiled && fault === 'unavailable') {
      spoiled = true;
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
      res.end(JSON.stringify({ error: { code: 'database_unavailable', message: 'Postgres cannot be reached' } }));
      return;
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers[k] = v;
    const upstream = await fetch(new URL(req.url!, apiUrl), { method: req.method!, headers, ...(body.length > 0 ? { body } : {}) });
    const text = await upstream.text();
    if (isSend && !spoiled && fault === 'lose-reply') {
      spoiled = true;
      req.socket.destroy();
      return;
    }
    res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
    res.end(text);
  };
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as import('node:net').AddressInfo;
  return { url: `http://127.0.0.1:${port}`, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('send is safe to repeat', () => {
  it('every send carries a fresh idempotency key by default; --idempotency-key names one', async () => {
    const a = await json('ann', 'send', 'bob', 'twice, no key');
    const b = await json('ann', 'send', 'bob', 'twice, no key');
    expect(a.id, 'two invocations are two handoffs').not.toBe(b.id);
    expect(a.idempotencyKey).toMatch(/^cli-/);
    expect(b.idempotencyKey).not.toBe(a.idempotencyKey);
    expect((await cli('ann', ['send', 'bob', 'keyed', '--idempotency-key', 'my-key-1'])).out).toMatch(/^sent:/);
    expect((await cli('ann', ['send', 'bob', 'keyed', '--idempotency-key', 'my-key-1'])).out).toMatch(/^already sent \(same key\)/);
  });

  it('a send whose answer was lost is repeated with the same key and stored once', async () => {
    const front = await faultyFront('lose-reply');
    try {
      const r = await runCli(
        ['send', 'bob', 'answer lost'],
        { ...env, BATON_URL: front.url, BATON_TOKEN: tokens['ann']! },
        { out: () => undefined, err: () => undefined },
      );
      expect(r, 'the retry succeeded').toBe(0);
      expect(front.seen.length, 'sent twice').toBe(2);
      expect(front.seen[1], 'with the same key').toBe(front.seen[0]);
      expect(await count('answer lost'), 'stored once').toBe(1);
    } finally {
      await front.close();
    }
  });

  it('a send answered 503 database_unavailable is repeated with the same key', async () => {
    const front = await faultyFront('unavailable');
    try {
      let err = '';
      let out = '';
      const r = await runCli(
        ['send', 'bob', 'db was down'],
        { ...env, BATON_URL: front.url, BATON_TOKEN: tokens['ann']! },
        { out: (s) => void (out += s), err: (s) => void (err += s) },
      );
      expect(r, err).toBe(0);
      expect(out).toMatch(/^sent:/);
      expect(err).toMatch(/503 database_unavailable.*retrying.*same idempotency key/);
      expect(front.seen).toHaveLength(2);
      expect(front.seen[1]).toBe(front.seen[0]);
      expect(await count('db was down')).toBe(1);
    } finally {
      await front.close();
    }
  });
});

describe('registering real agents from the CLI', () => {
  it('adds command and webhook agents, refuses bad settings with invalid_settings, and never prints a secret', async () => {
    const command = await json(
      'admin',
      'agent',
      'add',
      'runner',
      '--provider',
      'command',
      '--pool',
      'host-a',
      '--settings',
      JSON.stringify({
        argv: [process.execPath, '-e', 'process.stdout.write("ok")'],
        env: { API_TOKEN: { value: 'cli-command-secret', secret: true } },
      }),
    );
    expect(command).toMatchObject({ id: 'runner', provider: 'command', pool: 'host-a' });
    const hook = await json(
      'admin',
      'agent',
      'add',
      'hook',
      '--provider',
      'webhook',
      '--settings',
      JSON.stringify({ url: 'http://127.0.0.1:9/turns', secret: 'cli-webhook-secret-0123456789' }),
    );
    expect(hook.settings.secret).toBe('[redacted]');
    const listed = await cli('admin', ['agent', 'list', '--json']);
    expect(listed.out).toContain('runner');
    expect(listed.out).not.toContain('cli-command-secret');
    expect(listed.out).not.toContain('cli-webhook-secret');
    expect((await cli('admin', ['agent', 'list'])).out).toMatch(/^runner +command +runner +runner +host-a +/m);

    const bad = await cli('admin', [
      'agent',
      'add',
      'broken',
      '--provider',
      'command',
      '--settings',
      JSON.stringify({ argv: [], shell: true }),
    ]);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('invalid_settings');
    const unknown = await cli('admin', ['agent', 'add', 'nope', '--provider', 'teleporter']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('--provider must be one of');
  });
});

describe('an operator release of an owned handoff', () => {
  it('needs --all-owners from an admin that did not send it, and then releases it', async () => {
    const h = await json('ann', 'send', 'bob', 'claimed and stuck', '--title', 'Stuck');
    await json('bob', 'accept', h.id);
    const hidden = await cli('admin', ['release', h.id, '--reason', 'known to be done']);
    expect(hidden.code).toBe(1);
    expect(hidden.err).toContain('handoff_not_found');
    const released = await json('admin', 'release', h.id, '--reason', 'known to be done', '--all-owners');
    expect(released.state).toBe('CANCELLED');
  });
});
