import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../services/cli/program.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { scratchDir } from '../support/scratch-dir.ts';

/**
 * A three-agent relay through the CLI, as agents would run it: Planner hands work to Engineer
 * in a tracked session; Engineer records a decision and a failed attempt and hands a sub-task to
 * Reviewer; Reviewer returns with evidence; Engineer returns; Planner accepts. Every step is in
 * both agents' inbox/outbox and in the event log. Each agent runs the CLI with its own token.
 */
let baton: TestBaton;
let apiUrl: string;
let env: Record<string, string>;
/** Each agent's own token: the CLI proves who it is with it (no --as, no BATON_AGENT). */
const tokens: Record<string, string> = {};

async function cli(as: string, ...argv: string[]) {
  let out = '';
  let err = '';
  const code = await runCli(
    argv,
    { ...env, BATON_TOKEN: tokens[as] ?? baton.adminToken },
    { out: (s) => void (out += s), err: (s) => void (err += s) },
  );
  if (code !== 0) throw new Error(`baton ${argv.join(' ')} (as ${as}) exited ${code}: ${err}`);
  return out;
}
const json = async (as: string, ...argv: string[]) => JSON.parse(await cli(as, ...argv, '--json'));
const ids = (list: any) => (list.handoffs as any[]).map((h) => h.id);

beforeAll(async () => {
  baton = await startTestBaton();
  baton.startWorker();
  apiUrl = await baton.listen();
  env = { BATON_URL: apiUrl, BATON_HOME: scratchDir('baton-relay-') };
  for (const a of ['planner', 'engineer', 'reviewer']) {
    await cli('admin', 'agent', 'add', a, '--provider', 'manual');
    tokens[a] = (await json('admin', 'token', 'create', '--agent', a)).token;
  }
});

afterAll(async () => {
  await baton?.stop();
});

describe('a three-agent relay', () => {
  it('planner -> engineer -> reviewer and back, with a session, facts, evidence and a close', async () => {
    const session = await json('planner', 'session', 'new', 'Login feature', '--summary', 'users need to sign in');
    const task = await json(
      'planner',
      'send',
      'planner',
      'engineer',
      'Build the login form',
      '--title',
      'Login form',
      '--session',
      session.id,
      '--done-when',
      'tests pass',
    );
    expect(ids(await json('engineer', 'inbox'))).toContain(task.id);
    expect(ids(await json('planner', 'outbox'))).toContain(task.id);

    const claim = await json('engineer', 'accept', task.id);
    expect(claim.claim.attempt).toBe(1);
    expect(claim.packet.text).toContain('Done when: tests pass');
    const decision = await json('engineer', 'fact', 'add', session.id, 'decision', 'use the existing session middleware');
    await json('engineer', 'fact', 'add', session.id, 'failed_attempt', 'tried JWT in cookies: blocked by the CSP');

    const sub = await json(
      'engineer',
      'send',
      'engineer',
      'reviewer',
      'Review the form',
      '--title',
      'Review login form',
      '--session',
      session.id,
    );
    expect(ids(await json('reviewer', 'inbox'))).toContain(sub.id);
    expect(ids(await json('engineer', 'outbox'))).toContain(sub.id);
    const review = await json('reviewer', 'accept', sub.id);
    // The reviewer sees what the engineer learned.
    expect(review.packet.text).toContain('use the existing session middleware');
    expect(review.packet.text).toContain('tried JWT in cookies');
    const evidence = await json('reviewer', 'fact', 'add', session.id, 'result', 'reviewed: 2 nits, no blockers');
    const reviewed = await json(
      'reviewer',
      'return',
      sub.id,
      '--token',
      review.claim.token,
      '--summary',
      'looks good',
      '--fact',
      evidence.id,
    );
    expect(reviewed.handoff.workState).toBe('returned');
    await json('engineer', 'close', sub.id, 'accepted');

    const result = await json('engineer', 'fact', 'add', session.id, 'result', 'login form merged, tests pass');
    const done = await json('engineer', 'return', task.id, '--summary', 'done, reviewed by reviewer', '--fact', result.id);
    expect(done.handoff.workState).toBe('returned');
    const board = await json('planner', 'board', '--agent', 'planner');
    expect(board.returned.map((c: any) => c.handoff.id)).toContain(task.id);
    const closed = await json('planner', 'close', task.id, 'accepted');
    expect(closed.work.resolution).toBe('accepted');

    // The log of each handoff holds every step, in order, with who did it.
    const t = await json('planner', 'show', task.id);
    expect(t.events.map((e: any) => [e.event, e.actor.id])).toEqual([
      ['enrolled', 'planner'],
      ['claimed', 'engineer'],
      ['claimed', 'engineer'],
      ['returned', 'engineer'],
      ['work_returned', 'engineer'],
      ['closed_accepted', 'planner'],
    ]);
    // ...and which token did it: each agent's own.
    const tokenIds = Object.fromEntries(
      await Promise.all(['planner', 'engineer'].map(async (a) => [a, (await json(a, 'whoami')).tokenId])),
    );
    expect(t.events.map((e: any) => e.actor.tokenId)).toEqual([
      tokenIds['planner'],
      tokenIds['engineer'],
      tokenIds['engineer'],
      tokenIds['engineer'],
      tokenIds['engineer'],
      tokenIds['planner'],
    ]);
    const s = await json('reviewer', 'show', sub.id);
    expect(s.events.map((e: any) => e.event)).toEqual(['enrolled', 'claimed', 'claimed', 'returned', 'work_returned', 'closed_accepted']);
    expect(s.work.resultFactIds).toEqual([evidence.id]);

    // Inboxes are empty again. The session shows each agent the handoffs it may see (the
    // engineer sent the review to the reviewer: owned, so hidden from the planner) and all facts.
    expect(ids(await json('engineer', 'inbox'))).not.toContain(task.id);
    expect(ids(await json('reviewer', 'inbox'))).not.toContain(sub.id);
    expect((await json('engineer', 'session', 'show', session.id)).handoffs.map((h: any) => h.id)).toEqual([task.id, sub.id]);
    const shown = await json('planner', 'session', 'show', session.id);
    expect(shown.handoffs.map((h: any) => h.id)).toEqual([task.id]);
    expect(shown.facts.map((f: any) => f.id)).toContain(decision.id);
    expect(shown.facts).toHaveLength(4);
  });
});
