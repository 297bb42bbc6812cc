import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../services/cli/program.ts';
import { captureCli } from '../support/capture-cli.ts';
import { eventually } from '../support/eventually.ts';
import { runBaton } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { scratchDir } from '../support/scratch-dir.ts';

let baton: TestBaton;
let apiUrl: string;
let env: Record<string, string>;

/** Runs the CLI in this process and captures what it prints. */
async function cli(...argv: string[]) {
  return captureCli(env, argv);
}

beforeAll(async () => {
  baton = await startTestBaton();
  baton.startWorker();
  apiUrl = await baton.listen();
  env = { BATON_URL: apiUrl, BATON_TOKEN: baton.adminToken, BATON_HOME: scratchDir('baton-cli-') };
});

afterAll(async () => {
  await baton?.stop();
});

describe('the baton CLI', () => {
  it('adds agents, sends, shows, lists and reports status through the API', async () => {
    expect((await cli('agent', 'add', 'planner', '--name', 'Planner')).code).toBe(0);
    const added = await cli('agent', 'add', 'Engineer', '--settings', '{"thinkMs":20}');
    expect(added).toMatchObject({ code: 0 });
    expect(added.out).toContain('added engineer');
    expect((await cli('agent', 'list')).out).toMatch(/engineer\s+demo/);

    const sent = await cli(
      'send',
      'planner',
      'engineer',
      'Build the thing',
      '--title',
      'Build',
      '--due-minutes',
      '30',
      '--question',
      'which db?',
      '--json',
    );
    expect(sent.code).toBe(0);
    const h = JSON.parse(sent.out);
    expect(h).toMatchObject({ from: 'planner', to: 'engineer', title: 'Build', context: { openQuestions: ['which db?'] } });
    expect(Date.parse(h.dueAt) - Date.parse(h.createdAt)).toBeGreaterThanOrEqual(30 * 60_000 - 1000);

    await eventually(async () => {
      const shown = await cli('show', h.id);
      expect(shown.code).toBe(0);
      expect(shown.out).toContain('RUNNING        -> RETURNED');
      expect(shown.out).toContain('WAITING        -> SENDING');
    });
    expect((await cli('list', '--to', 'engineer')).out).toContain(h.id);
    const status = JSON.parse((await cli('status', '--json')).out);
    expect(status.byState.RETURNED).toBe(1);
    const again = await cli('send', 'planner', 'engineer', 'Build the thing', '--key', 'k1');
    const repeat = await cli('send', 'planner', 'engineer', 'Build the thing', '--key', 'k1');
    expect(again.out).toMatch(/^sent:/);
    expect(repeat.out).toMatch(/^already sent/);
    expect((await cli('agent', 'remove', 'planner')).code).toBe(0);
  });

  it('blocks and allows connections, changes settings, acknowledges, releases and shows an inbox', async () => {
    for (const id of ['lead', 'helper']) expect((await cli('agent', 'add', id)).code).toBe(0);
    expect((await cli('agent', 'add', 'sleeper', '--settings', '{"behavior":"hang"}')).code).toBe(0);

    expect((await cli('block', 'lead', 'helper')).out).toContain('blocked: lead -> helper');
    const held = JSON.parse((await cli('send', 'lead', 'helper', 'please', '--title', 'Held work', '--json')).out);
    await eventually(async () => expect(JSON.parse((await cli('show', held.id, '--json')).out).state).toBe('HELD'));
    expect((await cli('allow', 'lead', 'helper')).out).toContain('allowed');
    await eventually(async () => expect(JSON.parse((await cli('show', held.id, '--json')).out).state).toBe('RETURNED'));

    expect((await cli('config', 'enabled', 'false')).out).toMatch(/enabled\s+false/);
    expect((await cli('config', 'enabled')).out.trim()).toBe('false');
    expect((await cli('config', 'enabled', 'true')).code).toBe(0);
    const bad = await cli('config', 'connections', 'closed');
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('validation_failed');
    expect((await cli('config', 'colour', 'blue')).err).toContain('unknown_setting');
    expect(JSON.parse((await cli('config', '--json')).out)).toMatchObject({ enabled: true, connections: 'open' });

    // A plain message to a busy agent: the recipient reads it instead of getting a turn.
    const busy = JSON.parse((await cli('send', 'lead', 'sleeper', 'long job', '--title', 'Long job', '--json')).out);
    await eventually(async () => expect(JSON.parse((await cli('show', busy.id, '--json')).out).state).toBe('RUNNING'));
    const note = JSON.parse((await cli('send', 'lead', 'sleeper', 'fyi', '--due-minutes', '1', '--json')).out);
    // An admin token is no agent: it must say whom it acts for.
    expect((await cli('ack', note.id)).err).toMatch(
      /validation_failed: an admin token acts for no agent: name the one to act as in body\/as \(the CLI: --as <agent>/,
    );
    expect((await cli('ack', note.id, '--as', 'lead')).err).toContain('not_recipient');
    const acked = await runCli(['ack', note.id], { ...env, BATON_AGENT: 'sleeper' }, { out: () => undefined, err: () => undefined });
    expect(acked).toBe(0);
    expect(JSON.parse((await cli('show', note.id, '--json')).out).state).toBe('ACKNOWLEDGED');

    const inbox = await cli('inbox', 'sleeper');
    expect(inbox.out).toContain('inbox of sleeper: 1 in progress');
    expect(inbox.out).toContain(busy.id);

    // The hung turn is released by a person; nothing is resent.
    const released = await cli('release', busy.id, '--reason', 'the session was restarted');
    expect(released.out).toContain('released');
    expect(JSON.parse((await cli('show', busy.id, '--json')).out).state).toBe('CANCELLED');
    expect((await cli('release', busy.id)).err).toContain('invalid_transition');
  });

  it('exits 2 on usage errors, without calling the API', async () => {
    const before = (await baton.db.pool.query('SELECT count(*)::int AS n FROM handoffs')).rows[0].n;
    for (const argv of [
      ['send', 'planner'],
      ['send', 'a', 'b', 'msg', '--due-minutes', 'soon'],
      ['agent', 'add', 'x', '--provider', 'carrier-pigeon'],
      ['agent', 'add', 'x', '--settings', '[1,2]'],
      ['list', '--limit', '0'],
      ['frobnicate'],
      ['send', 'a', 'b', 'c', '--no-such-flag'],
    ]) {
      const r = await cli(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err, argv.join(' ')).toMatch(/error/i);
    }
    expect((await baton.db.pool.query('SELECT count(*)::int AS n FROM handoffs')).rows[0].n).toBe(before);
  });

  it('exits 1 with the stable error code when the API refuses, and says how to fix an unreachable API', async () => {
    const refused = await cli('send', 'engineer', 'nobody', 'hi');
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('unknown_recipient');
    let err = '';
    const unreachable = await runCli(
      ['status'],
      { BATON_URL: 'http://127.0.0.1:9' },
      { out: () => undefined, err: (s) => void (err += s) },
    );
    expect(unreachable).toBe(1);
    expect(err).toMatch(/cannot reach Baton at http:\/\/127.0.0.1:9/);
  });

  it('as a real process: exit codes reach the shell', async () => {
    expect((await runBaton(['send', 'only-one-arg'], env)).code).toBe(2);
    const ok = await runBaton(['status'], env);
    expect(ok.code).toBe(0);
    expect(ok.output).toContain('project default');
  });
});
