import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureCli } from '../support/capture-cli.ts';
import { runBaton } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * Who the CLI is, end to end over HTTP: `baton init` writes an admin token and a profile only
 * their owner can read; the CLI finds its token in BATON_TOKEN or the profile; tokens are
 * created, listed (never their secrets) and revoked; an agent token acts as its own agent, in
 * its own project, and nothing else. Every agent uses the `manual` provider: nothing is
 * delivered, so no worker runs.
 */
let baton: TestBaton;
let apiUrl: string;
let adminEnv: Record<string, string>;
const dirs: string[] = [];
/** Every secret this file saw: none may ever appear in a token listing. */
const secrets: string[] = [];

/** A fresh, empty directory of this file's own (never the real ~/.baton). */
function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `baton-identity-${label}-`));
  dirs.push(dir);
  return dir;
}

const modeOf = (path: string) => statSync(path).mode & 0o777;

/** Runs the CLI in this process with exactly `env` and captures what it prints. */
async function cli(env: Record<string, string>, ...argv: string[]) {
  return captureCli(env, argv);
}

/** Runs the CLI and fails the test unless it exits 0; returns stdout. */
async function ok(env: Record<string, string>, ...argv: string[]): Promise<string> {
  const r = await cli(env, ...argv);
  if (r.code !== 0) throw new Error(`baton ${argv.join(' ')} exited ${r.code}: ${r.err}`);
  return r.out;
}

/** An environment that carries only a token and the API's URL (an empty BATON_HOME: no profile). */
const withToken = (token: string): Record<string, string> => ({ BATON_URL: apiUrl, BATON_HOME: tempDir('home'), BATON_TOKEN: token });

/** Creates an agent token through the CLI (as the admin) and remembers its secret. */
async function createToken(agent: string, ...extra: string[]): Promise<{ token: string; id: string }> {
  const body = JSON.parse(await ok(adminEnv, ...extra, 'token', 'create', '--agent', agent, '--json'));
  secrets.push(body.token);
  return { token: body.token, id: body.record.id };
}

beforeAll(async () => {
  baton = await startTestBaton();
  apiUrl = await baton.listen();
  secrets.push(baton.adminToken);
  adminEnv = withToken(baton.adminToken);
  for (const a of ['alice', 'bob', 'carol']) await ok(adminEnv, 'agent', 'add', a, '--provider', 'manual');
});

afterAll(async () => {
  await baton?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('baton init', () => {
  it('writes an owner-only admin token and a profile that uses it; again is a no-op; --force replaces it', async () => {
    const home = tempDir('init');
    const initEnv = { DATABASE_URL: baton.databaseUrl, BATON_HOME: home, BATON_URL: apiUrl };
    const tokenPath = join(home, 'admin.token');
    const profilePath = join(home, 'profile.json');

    // The database already has an admin token (startTestBaton's): init still writes its own file.
    const first = await cli(initEnv, 'init');
    expect(first.code, first.err).toBe(0);
    expect(first.out).toContain(`admin token written to ${tokenPath} (mode 0600)`);
    // The admin secret is readable by its owner only, like an ssh key.
    expect(modeOf(tokenPath)).toBe(0o600);
    const written = readFileSync(tokenPath, 'utf8');
    secrets.push(written.trim());
    // A real Baton secret, and a new one (not a copy of an existing token).
    expect(written).toMatch(/^baton_[A-Za-z0-9_-]{43}\n$/);
    expect(written.trim()).not.toBe(baton.adminToken);
    // The profile is a secret too, and points at the token file (it does not copy the token).
    expect(modeOf(profilePath)).toBe(0o600);
    const profile = JSON.parse(readFileSync(profilePath, 'utf8'));
    expect(profile).toEqual({ url: apiUrl, tokenFile: tokenPath });

    // The written token works with nothing but BATON_HOME: no BATON_TOKEN, no BATON_URL.
    const me = await cli({ BATON_HOME: home }, 'whoami');
    expect(me.code, me.err).toBe(0);
    expect(me.out).toMatch(/^admin in project default \(token [0-9a-f-]{36}\)\n$/);

    // A second init finds the working token and leaves both files alone.
    const before = { token: statSync(tokenPath).mtimeMs, profile: statSync(profilePath).mtimeMs };
    const again = await cli(initEnv, 'init');
    expect(again.code, again.err).toBe(0);
    expect(again.out).toContain(`already initialised: ${tokenPath} holds a working admin token`);
    expect(readFileSync(tokenPath, 'utf8')).toBe(written);
    expect({ token: statSync(tokenPath).mtimeMs, profile: statSync(profilePath).mtimeMs }).toEqual(before);

    // --force mints a new admin token (--print shows it once, and it is the one on file).
    const forced = await cli(initEnv, 'init', '--force', '--print');
    expect(forced.code, forced.err).toBe(0);
    // With --print, stdout is the token alone; what happened is said on stderr.
    expect(forced.err).toContain(`admin token written to ${tokenPath} (mode 0600)`);
    const replaced = readFileSync(tokenPath, 'utf8');
    secrets.push(replaced.trim());
    expect(replaced).not.toBe(written);
    expect(forced.out.trim()).toBe(replaced.trim());
    expect(modeOf(tokenPath)).toBe(0o600);
    // ...and the profile still reaches it: the new token is the one the CLI now uses.
    const meAgain = JSON.parse(await ok({ BATON_HOME: home }, 'whoami', '--json'));
    expect(meAgain).toMatchObject({ admin: true, agent: null, project: 'default' });
    expect(meAgain.tokenId).not.toBe(JSON.parse(await ok(adminEnv, 'whoami', '--json')).tokenId);

    // A token file others can read is refused, even behind a private profile.
    chmodSync(tokenPath, 0o644);
    const leaky = await cli({ BATON_HOME: home }, 'whoami');
    expect(leaky.code).toBe(2);
    expect(leaky.err).toContain(`${tokenPath} is readable by others (mode 644); run: chmod 600 ${tokenPath}`);
    chmodSync(tokenPath, 0o600);
  });

  it('refuses to run without DATABASE_URL (it writes to the database), exit 2', async () => {
    const home = tempDir('init-nodb');
    const r = await cli({ BATON_HOME: home, BATON_URL: apiUrl }, 'init');
    // init is a server-side command: without a database it is a usage error, and writes nothing.
    expect(r.code).toBe(2);
    expect(r.err).toContain('DATABASE_URL is not set');
    expect(existsSync(join(home, 'admin.token'))).toBe(false);
  });
});

describe('BATON_ADMIN_TOKEN (a token kept in a Secret, registered by baton db migrate)', () => {
  it('token generate prints a fresh secret offline; db migrate registers it once, never prints it; a revoked or malformed one fails', async () => {
    const generated = (await ok({ BATON_HOME: tempDir('gen') }, 'token', 'generate')).trim();
    expect(generated).toMatch(/^baton_[A-Za-z0-9_-]{43}$/);
    expect((await ok({ BATON_HOME: tempDir('gen') }, 'token', 'generate')).trim()).not.toBe(generated);
    secrets.push(generated);
    // Not a token yet.
    expect((await cli(withToken(generated), 'whoami')).code).toBe(1);

    const env = { DATABASE_URL: baton.databaseUrl, BATON_HOME: tempDir('migrate'), BATON_ADMIN_TOKEN: generated };
    const first = await cli(env, 'db', 'migrate');
    expect(first.code, first.err).toBe(0);
    expect(first.out).toContain('admin token from BATON_ADMIN_TOKEN: registered');
    expect(first.out + first.err).not.toContain(generated);
    expect(await ok(withToken(generated), 'whoami')).toMatch(/^admin in project default/);
    // Twice (every rollout runs the Job): nothing new.
    expect(JSON.parse(await ok(env, 'db', 'migrate', '--json'))).toEqual({ applied: [], adminToken: 'present' });
    const admins = await baton.db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM agent_tokens WHERE name = 'admin (BATON_ADMIN_TOKEN)'",
    );
    expect(admins.rows[0]?.n).toBe(1);

    const malformed = await cli({ ...env, BATON_ADMIN_TOKEN: 'hunter2' }, 'db', 'migrate');
    expect(malformed.code).toBe(1);
    expect(malformed.err).toContain('validation_failed');
    expect(malformed.err).toContain('baton token generate');

    // A revoked one is never brought back by the next rollout.
    const id = (JSON.parse(await ok(withToken(generated), 'whoami', '--json')) as { tokenId: string }).tokenId;
    await ok(adminEnv, 'token', 'revoke', id);
    const revoked = await cli(env, 'db', 'migrate');
    expect(revoked.code).toBe(1);
    expect(revoked.err).toContain('invalid_token');
    expect((await cli(withToken(generated), 'whoami')).code).toBe(1);
  });
});

describe('where the CLI finds its token', () => {
  it('BATON_PROFILE, refused when others can read it, and BATON_TOKEN wins over it', async () => {
    const alice = await createToken('alice');
    const bob = await createToken('bob');
    const dir = tempDir('profile');
    const profilePath = join(dir, 'alice.json');
    writeFileSync(profilePath, JSON.stringify({ url: apiUrl, token: alice.token }), { mode: 0o600 });
    chmodSync(profilePath, 0o600);
    const fromProfile = { BATON_HOME: tempDir('home'), BATON_PROFILE: profilePath };

    // A profile named by BATON_PROFILE supplies the URL and the token.
    expect(await ok(fromProfile, 'whoami')).toMatch(/^alice in project default /);
    // The environment's token wins over the profile's.
    expect(await ok({ ...fromProfile, BATON_TOKEN: bob.token }, 'whoami')).toMatch(/^bob in project default /);

    // A profile readable by group or others is refused (its token would be everyone's): exit 2, with the fix.
    chmodSync(profilePath, 0o644);
    const refused = await cli(fromProfile, 'whoami');
    expect(refused.code).toBe(2);
    expect(refused.err).toContain(`${profilePath} is readable by others (mode 644); run: chmod 600 ${profilePath}`);
    // Group-readable alone is as bad.
    chmodSync(profilePath, 0o640);
    expect((await cli(fromProfile, 'whoami')).err).toContain(`run: chmod 600 ${profilePath}`);
    // The exit code reaches the shell when baton runs as a real process.
    const real = await runBaton(['whoami'], fromProfile);
    expect(real.code).toBe(2);
    expect(real.output).toContain(`chmod 600 ${profilePath}`);
    // Once private again, it works.
    chmodSync(profilePath, 0o600);
    expect(await ok(fromProfile, 'whoami')).toMatch(/^alice /);
  });

  it('with no token anywhere, a call fails as unauthenticated and says where a token comes from', async () => {
    const home = tempDir('empty');
    const r = await cli({ BATON_URL: apiUrl, BATON_HOME: home }, 'status');
    // The API refuses an anonymous call; the CLI passes the stable code on, exit 1.
    expect(r.code).toBe(1);
    expect(r.err).toContain('unauthenticated');
    // ...and tells how to fix it: BATON_TOKEN, or a profile at the path it looked at.
    expect(r.err).toContain('set BATON_TOKEN');
    expect(r.err).toContain(join(home, 'profile.json'));
  });
});

describe('baton token', () => {
  it('create prints the secret once; list shows id, agent and project but never a secret', async () => {
    const created = await cli(adminEnv, 'token', 'create', '--agent', 'carol', '--name', 'carol laptop');
    expect(created.code, created.err).toBe(0);
    // stdout is the secret alone (TOKEN=$(baton token create ...)); the summary goes to stderr.
    const secret = created.out.trim();
    const summary = created.err.trim();
    secrets.push(secret);
    expect(secret).toMatch(/^baton_[A-Za-z0-9_-]{43}$/);
    const id = /^token ([0-9a-f-]{36}) for carol in project default: shown only this once$/.exec(summary)?.[1];
    expect(id, summary).toBeDefined();

    const listed = await cli(adminEnv, 'token', 'list');
    expect(listed.code, listed.err).toBe(0);
    // The listing names the token by id, agent@project and label...
    expect(listed.out).toMatch(new RegExp(`^${id} +carol@default +carol laptop +`, 'm'));
    const asJson = await cli(adminEnv, 'token', 'list', '--json');
    expect(asJson.code, asJson.err).toBe(0);
    const item = (JSON.parse(asJson.out) as any[]).find((t) => t.id === id);
    expect(item).toMatchObject({ id, agent: 'carol', project: 'default', admin: false, name: 'carol laptop', revokedAt: null });
    // ...and no listing, text or JSON, ever holds a secret (only hashes are stored).
    for (const s of secrets) {
      expect(listed.out).not.toContain(s);
      expect(asJson.out).not.toContain(s);
    }
    expect(Object.keys(item).sort()).toEqual([
      'admin',
      'agent',
      'agentGeneration',
      'createdAt',
      'id',
      'lastUsedAt',
      'name',
      'project',
      'revokedAt',
    ]);
  });

  it('create --profile writes an owner-only profile that works on its own', async () => {
    const profilePath = join(tempDir('made'), 'nested', 'bob.json');
    const r = await cli(adminEnv, 'token', 'create', '--agent', 'bob', '--profile', profilePath);
    expect(r.code, r.err).toBe(0);
    secrets.push(r.out.split('\n')[0]!);
    expect(r.err).toContain(`profile written to ${profilePath}`);
    // The profile holds a secret: mode 0600, its folder created for it.
    expect(modeOf(profilePath)).toBe(0o600);
    expect(JSON.parse(readFileSync(profilePath, 'utf8'))).toEqual({ url: apiUrl, token: r.out.split('\n')[0], project: 'default' });
    // It is all the CLI needs: no BATON_URL, no BATON_TOKEN.
    expect(await ok({ BATON_HOME: tempDir('home'), BATON_PROFILE: profilePath }, 'whoami')).toMatch(/^bob in project default /);
  });

  it('revoke: the token is refused from the next call on', async () => {
    const doomed = await createToken('alice', '--project', 'default');
    const env = withToken(doomed.token);
    expect(await ok(env, 'whoami')).toMatch(/^alice /);
    expect(await ok(adminEnv, 'token', 'revoke', doomed.id)).toBe(`revoked ${doomed.id}\n`);
    const after = await cli(env, 'whoami');
    // A revoked token fails the operation (exit 1) with the stable code, and says the token was refused.
    expect(after.code).toBe(1);
    expect(after.err).toContain('invalid_token');
    expect(after.err).toContain('the token in BATON_TOKEN or the profile was refused');
    // The listing shows it revoked.
    const table = await ok(adminEnv, 'token', 'list');
    const revokedAt = table.split('\n')[0]!.indexOf('REVOKED');
    expect(
      table
        .split('\n')
        .find((l) => l.startsWith(doomed.id))
        ?.slice(revokedAt),
    ).toMatch(/^(just now|\d+ s ago)$/);
    // Revoking it again is an error, not a silent success.
    const twice = await cli(adminEnv, 'token', 'revoke', doomed.id);
    expect(twice.code).toBe(1);
    expect(twice.err).toContain('token_not_found');
  });

  it("an agent token cannot create, list or revoke others' tokens", async () => {
    const alice = withToken((await createToken('alice')).token);
    const bob = await createToken('bob');
    const tokensBefore = (JSON.parse(await ok(adminEnv, 'token', 'list', '--all', '--json')) as unknown[]).length;
    const create = await cli(alice, 'token', 'create', '--agent', 'alice');
    // Minting tokens is for admins only: an agent cannot mint itself (or anyone) a new one.
    expect(create.code).toBe(1);
    expect(create.err).toContain('forbidden');
    expect((JSON.parse(await ok(adminEnv, 'token', 'list', '--all', '--json')) as unknown[]).length).toBe(tokensBefore);
    // Nor see the token list.
    expect((await cli(alice, 'token', 'list')).err).toContain('forbidden');
    // Nor revoke another agent's token (bob's still works afterwards).
    expect((await cli(alice, 'token', 'revoke', bob.id)).err).toContain('forbidden');
    expect(await ok(withToken(bob.token), 'whoami')).toMatch(/^bob /);
  });
});

describe('identity comes from the token', () => {
  it("alice's token sends, accepts and reads as alice, and as nobody else", async () => {
    const aliceToken = await createToken('alice');
    const alice = withToken(aliceToken.token);

    // whoami names the token's agent and project.
    expect(await ok(alice, 'whoami')).toBe(`alice in project default (token ${aliceToken.id})\n`);
    expect(JSON.parse(await ok(alice, 'whoami', '--json'))).toEqual({
      tokenId: aliceToken.id,
      admin: false,
      agent: 'alice',
      project: 'default',
    });

    // The two-argument send: the token says who sends.
    const sent = JSON.parse(await ok(alice, 'send', 'bob', 'hi', '--json'));
    expect(sent).toMatchObject({ from: 'alice', to: 'bob', message: 'hi' });
    // ...and the event log records alice, by this token.
    const shown = JSON.parse(await ok(alice, 'show', sent.id, '--json'));
    expect(shown.events[0].actor).toMatchObject({ id: 'alice', tokenId: aliceToken.id });

    // Naming another sender with alice's token is refused, and records nothing.
    const countBefore = (await baton.db.pool.query('SELECT count(*)::int AS n FROM handoffs')).rows[0].n;
    const spoof = await cli(alice, 'send', 'carol', 'bob', 'hi from carol');
    expect(spoof.code).toBe(1);
    expect(spoof.err).toContain('identity_mismatch');
    // BATON_AGENT naming someone else is the same lie.
    expect((await cli({ ...alice, BATON_AGENT: 'carol' }, 'send', 'bob', 'hi')).err).toContain('identity_mismatch');
    expect((await baton.db.pool.query('SELECT count(*)::int AS n FROM handoffs')).rows[0].n).toBe(countBefore);

    // Work for alice: claiming it as someone else is refused; as herself (no --as) it is hers.
    const work = JSON.parse(await ok(adminEnv, 'send', 'bob', 'alice', 'review this', '--title', 'Review', '--json'));
    const asOther = await cli(alice, 'accept', work.id, '--as', 'carol');
    expect(asOther.code).toBe(1);
    expect(asOther.err).toContain('identity_mismatch');
    const claimed = JSON.parse(await ok(alice, 'accept', work.id, '--json'));
    expect(claimed.handoff.work.claimedBy).toBe('alice');

    // `inbox` with no argument is the token's own inbox.
    const inbox = await ok(alice, 'inbox');
    expect(inbox).toMatch(/^inbox of alice: /);
    expect(inbox).toContain(work.id);
    // Another agent's inbox is not alice's to read.
    const peek = await cli(alice, 'inbox', 'bob');
    expect(peek.code).toBe(1);
    expect(peek.err).toContain('forbidden');
  });
});

describe('a token of another project', () => {
  let zedToken: { token: string; id: string };
  /** zed's own profile, as `token create --profile` writes it (it names project other). */
  let zedProfile: Record<string, string>;
  /** A handoff in project default that zed must never see. */
  let defaultWork: { id: string };
  /** zed's own handoff in project other. */
  let zedWork: { id: string };

  beforeAll(async () => {
    defaultWork = JSON.parse(await ok(withToken((await createToken('alice')).token), 'send', 'bob', 'default-only business', '--json'));
    expect(await ok(adminEnv, 'project', 'create', 'other')).toBe('created project other\n');
    for (const a of ['zed', 'yan']) await ok(adminEnv, '--project', 'other', 'agent', 'add', a, '--provider', 'manual');
    zedToken = await createToken('zed', '--project', 'other');
    const profilePath = join(tempDir('zed'), 'profile.json');
    const made = await cli(adminEnv, '--project', 'other', 'token', 'create', '--agent', 'zed', '--profile', profilePath);
    expect(made.code, made.err).toBe(0);
    secrets.push(made.out.split('\n')[0]!);
    zedProfile = { BATON_HOME: tempDir('home'), BATON_PROFILE: profilePath };
    zedWork = JSON.parse(await ok(zedProfile, 'send', 'yan', 'other business', '--json'));
  });

  it('sees only its own project: default-project handoffs are invisible and the project cannot be switched', async () => {
    // The token (and its profile) are bound to project other.
    expect(await ok(zedProfile, 'whoami')).toMatch(/^zed in project other /);
    // zed's list holds its own handoff and nothing of project default.
    const listed = JSON.parse(await ok(zedProfile, 'list', '--json'));
    expect(listed.items.map((h: any) => h.id)).toEqual([zedWork.id]);
    expect(await ok(zedProfile, 'list')).not.toContain(defaultWork.id);

    // A default-project handoff does not exist as far as zed can tell.
    const show = await cli(zedProfile, 'show', defaultWork.id);
    expect(show.code).toBe(1);
    expect(show.err).toContain('handoff_not_found');
    // Naming project default (flag or environment) is refused, not silently ignored.
    const switched = await cli(zedProfile, '--project', 'default', 'list');
    expect(switched.code).toBe(1);
    expect(switched.err).toContain('forbidden');
    expect((await cli({ ...zedProfile, BATON_PROJECT: 'default' }, 'list')).err).toContain('forbidden');
  });

  it('BATON_TOKEN alone is enough: the token, not a --project flag, decides the project', async () => {
    const zed = withToken(zedToken.token);
    // An agent token carries its project; the CLI must not need to be told it again.
    const me = await cli(zed, 'whoami');
    expect(me.err).toBe('');
    expect(me.out).toMatch(/^zed in project other /);
    const listed = await cli(zed, 'list', '--json');
    expect(listed.err).toBe('');
    expect(JSON.parse(listed.out).items.map((h: any) => h.id)).toEqual([zedWork.id]);
    // ...and naming another project is still refused.
    expect((await cli(zed, '--project', 'default', 'list')).err).toContain('forbidden');
  });

  it('admin token list is scoped to the current project unless --all', async () => {
    // `token list` documents "--all: every project (default: the current project)": default here.
    expect(await ok(adminEnv, 'token', 'list')).not.toContain(zedToken.id);
    expect(await ok(adminEnv, '--project', 'default', 'token', 'list')).not.toContain(zedToken.id);
    expect(await ok(adminEnv, '--project', 'other', 'token', 'list')).toMatch(new RegExp(`^${zedToken.id} +zed@other `, 'm'));
    expect(await ok(adminEnv, 'token', 'list', '--all')).toMatch(new RegExp(`^${zedToken.id} +zed@other `, 'm'));
  });
});
