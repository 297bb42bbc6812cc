import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { EventStreamPublisher } from '../../libs/queue/event-stream.ts';
import { eventually } from '../support/eventually.ts';
import { captureCli } from '../support/capture-cli.ts';
import { openEvents } from '../support/sse-follower.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { scratchDir } from '../support/scratch-dir.ts';

/**
 * GET /v1/events over real sockets: two API servers on one database and one Redis prefix, the
 * writers' XADD after commit as the wake-up, Postgres as the truth.
 */
let baton: TestBaton;
let apiA: string;
let apiB: string;
const tokens: Record<string, string> = {};
let n = 0;

const auth = (agent: string) => ({ authorization: `Bearer ${tokens[agent]}` });

/** Every event agent `who` may see in the default project after `after`, in id order, straight from the log. */
async function visibleIdsAfter(who: string, after: string): Promise<string[]> {
  const { rows } = await baton.db.pool.query<{ id: string }>(
    `SELECT e.id::text AS id FROM handoff_events e JOIN handoffs h ON h.id = e.handoff_id
     JOIN projects p ON p.id = h.project_id JOIN agents a ON a.handle = $1 AND a.project_id = p.id AND a.removed_at IS NULL
     WHERE p.slug = 'default' AND e.id > $2::bigint AND (h.recipient_id IS NULL OR h.sender_id = a.id OR h.recipient_id = a.id)
     ORDER BY e.id`,
    [who, after],
  );
  return rows.map((r) => r.id);
}

/** Work from s to r, claimed and returned by r: four events on one handoff. */
async function roundTrip(): Promise<string> {
  const sent = await baton.post('/v1/handoffs', { to: 'r', title: `work ${++n}`, message: `do ${n}` }, auth('s'));
  expect(sent.status).toBe(201);
  const id = sent.body.id as string;
  const claim = await baton.post(`/v1/handoffs/${id}/accept`, {}, auth('r'));
  expect(claim.status).toBe(200);
  const back = await baton.post(`/v1/handoffs/${id}/return`, { claimToken: claim.body.claim.token, summary: 'done' }, auth('r'));
  expect(back.status).toBe(200);
  return id;
}

async function cli(env: Record<string, string>, ...argv: string[]) {
  return captureCli(env, argv);
}

beforeAll(async () => {
  baton = await startTestBaton();
  for (const id of ['s', 'r', 'o']) expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
  expect((await baton.post('/v1/projects', { id: 'other' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'f', provider: 'manual' }, { 'x-baton-project': 'other' })).status).toBe(201);
  for (const id of ['s', 'r', 'o']) tokens[id] = await baton.tokenFor(id);
  tokens['f'] = await baton.tokenFor('f', 'other');
  apiA = await baton.listen();
  apiB = await baton.listen();
});

afterAll(async () => {
  await baton?.stop();
});

describe('GET /v1/events', () => {
  it('answers as server-sent events that no cache keeps, with the event id, a stable type and the transition as JSON', async () => {
    const follower = await openEvents(apiA, tokens['s']!);
    expect(follower.status).toBe(200);
    expect(follower.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(follower.headers.get('cache-control')).toContain('no-store');
    const id = await roundTrip();
    await follower.until((es) => es.some((e) => e.handoffId === id && e.workTo === 'returned'), 'the return');
    await follower.close();
    const mine = follower.events.filter((e) => e.handoffId === id);
    const ids = mine.map((e) => BigInt(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? -1 : 1)));
    const first = mine[0]!;
    expect(first).toMatchObject({
      handoffId: id,
      event: 'enrolled',
      from: null,
      to: 'WAITING',
      title: `work ${n}`,
      sender: 's',
      recipient: 'r',
      type: 'delivery',
    });
    expect(first.sseId).toBe(first.id);
    expect(mine.find((e) => e.workTo !== null)?.type).toBe('work');
    expect(Date.parse(first.at)).not.toBeNaN();
  });

  it('resumed with Last-Event-ID after a disconnect, misses no event and repeats none, in order', async () => {
    const first = await openEvents(apiA, tokens['s']!);
    const start = first.lastId()!;
    expect(start).toMatch(/^\d+$/);
    // Concurrent writers: ids are taken before commit, so they may commit out of order.
    await Promise.all([roundTrip(), roundTrip(), roundTrip()]);
    await first.until((es) => es.filter((e) => e.workTo === 'returned').length === 3, 'three returns');
    await first.close();
    const cut = first.lastId()!;
    // Written while nobody follows.
    await Promise.all([roundTrip(), roundTrip()]);
    const resumed = await openEvents(apiA, tokens['s']!, { lastEventId: cut });
    await Promise.all([roundTrip(), roundTrip()]);
    const expected = await visibleIdsAfter('s', start);
    await resumed.until((es) => es.length > 0 && es[es.length - 1]!.id === expected[expected.length - 1], 'the last event');
    await resumed.close();
    const seen = [...first.events, ...resumed.events].map((e) => e.id);
    expect(seen).toEqual(expected);
  });

  it("never skips an event whose id was taken before a later one committed: a slow writer's event arrives, in id order", async () => {
    const follower = await openEvents(apiA, tokens['s']!);
    const first = await roundTrip();
    await follower.until((es) => es.some((e) => e.handoffId === first && e.workTo === 'returned'), 'the first round trip');
    const slow = await baton.db.pool.connect();
    try {
      await slow.query('BEGIN');
      // Takes its id now, commits last (as a writer whose statement is slow to finish).
      const { rows } = await slow.query<{ id: bigint }>(
        `INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, revision, created_at)
         VALUES ($1, 'RETURNED', 'RETURNED', 'slow_writer', 'system', 99, now()) RETURNING id`,
        [first],
      );
      const later = await roundTrip();
      // Wake the feed for the later events while the slow one is still uncommitted.
      await slow.query('COMMIT');
      await follower.until((es) => es.some((e) => e.handoffId === later && e.workTo === 'returned'), 'the later round trip');
      const ids = follower.events.map((e) => BigInt(e.id));
      expect(ids).toContain(rows[0]!.id);
      expect(ids).toEqual([...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      expect(new Set(ids).size).toBe(ids.length);
    } finally {
      slow.release();
      await follower.close();
    }
  });

  it('resumes with ?after= for clients that cannot set the header, and Last-Event-ID wins over it', async () => {
    const base = (await visibleIdsAfter('s', '0')).at(-1)!;
    const id = await roundTrip();
    const byQuery = await openEvents(apiA, tokens['s']!, { query: `after=${base}` });
    await byQuery.until((es) => es.some((e) => e.handoffId === id && e.workTo === 'returned'), 'the return, by ?after=');
    await byQuery.close();
    expect(byQuery.events[0]!.handoffId).toBe(id);
    const later = byQuery.events[1]!.id;
    const both = await openEvents(apiA, tokens['s']!, { query: `after=0`, lastEventId: later });
    await both.until((es) => es.some((e) => e.workTo === 'returned'), 'the return, by header');
    await both.close();
    expect(both.events.every((e) => BigInt(e.id) > BigInt(later))).toBe(true);
  });

  it("shows a bystander nothing of two other agents' owned handoff, while it sees the project's unowned work", async () => {
    const bystander = await openEvents(apiA, tokens['o']!);
    const foreign = await openEvents(apiA, tokens['f']!);
    const owned = await roundTrip();
    const control = await baton.post('/v1/handoffs', { to: '@project', title: 'for anyone', message: 'control' }, auth('s'));
    expect(control.status).toBe(201);
    await bystander.until((es) => es.some((e) => e.handoffId === control.body.id), 'the unowned control event');
    // The owned handoff's events were committed before the control's: had they been served, they would be here.
    expect(bystander.events.filter((e) => e.handoffId === owned)).toEqual([]);
    // Resuming from the start of the log shows no more than live following did.
    const replay = await openEvents(apiB, tokens['o']!, { lastEventId: '0' });
    await replay.until((es) => es.some((e) => e.handoffId === control.body.id), 'the control, replayed');
    await Promise.all([bystander.close(), replay.close()]);
    expect(replay.events.filter((e) => e.handoffId === owned)).toEqual([]);
    expect(replay.events.every((e) => e.recipient === null || e.sender === 'o' || e.recipient === 'o')).toBe(true);
    // Another project's agent sees neither.
    const other = await baton.post('/v1/handoffs', { to: '@project', title: 'their own', message: 'x' }, auth('f'));
    await foreign.until((es) => es.some((e) => e.handoffId === other.body.id), "its own project's control");
    await foreign.close();
    expect(foreign.events.filter((e) => e.handoffId === owned || e.handoffId === control.body.id)).toEqual([]);
  });

  it('refuses ?handoff= for a handoff the caller may not see, as if it did not exist', async () => {
    const owned = await roundTrip();
    const refused = await openEvents(apiA, tokens['o']!, { query: `handoff=${owned}` });
    expect(refused.status).toBe(404);
    const own = await openEvents(apiA, tokens['r']!, { query: `handoff=${owned}`, lastEventId: '0' });
    await own.until((es) => es.some((e) => e.workTo === 'returned'), "the handoff's history");
    await own.close();
    expect(new Set(own.events.map((e) => e.handoffId))).toEqual(new Set([owned]));
  });

  it('serves a resume from Postgres when the Redis stream was deleted or trimmed', async () => {
    const key = new RedisNames(baton.prefix).eventStream();
    const before = await openEvents(apiB, tokens['s']!);
    const cut = before.lastId()!;
    await before.close();
    const lost = await roundTrip();
    expect(await baton.redis.xlen(key)).toBeGreaterThan(0);
    await baton.redis.del(key);
    const resumed = await openEvents(apiB, tokens['s']!, { lastEventId: cut });
    await resumed.until((es) => es.some((e) => e.handoffId === lost && e.workTo === 'returned'), 'the events the stream lost');
    // Live events still arrive after the key is gone (the next XADD recreates it).
    const next = await roundTrip();
    await resumed.until((es) => es.some((e) => e.handoffId === next && e.workTo === 'returned'), 'a live event after the DEL');
    const cut2 = resumed.lastId()!;
    await resumed.close();
    const trimmedAway = await roundTrip();
    await baton.redis.xtrim(key, 'MAXLEN', 0);
    const again = await openEvents(apiB, tokens['s']!, { lastEventId: cut2 });
    await again.until((es) => es.some((e) => e.handoffId === trimmedAway && e.workTo === 'returned'), 'the trimmed events');
    await again.close();
    expect([...resumed.events, ...again.events].map((e) => e.id)).toEqual(
      await visibleIdsAfter('s', cut).then((ids) => ids.filter((i) => BigInt(i) <= BigInt(again.lastId()!))),
    );
  });

  it('appends one stream entry for everything committed in one turn of the event loop, naming the highest event id', async () => {
    const names = new RedisNames(`${baton.prefix}-batched`);
    const publisher = new EventStreamPublisher(baton.redis, names, baton.logger);
    publisher.published(['17', '9']);
    publisher.published(['12']);
    publisher.published([]);
    await eventually(async () => (await baton.redis.xlen(names.eventStream())) === 1, { what: 'the append' });
    publisher.published(['30']);
    await eventually(async () => (await baton.redis.xlen(names.eventStream())) === 2, { what: "the next turn's append" });
    const entries = (await baton.redis.xrange(names.eventStream(), '-', '+')).map(([, fields]) => fields);
    expect(entries).toEqual([
      ['top', '17', 'n', '3'],
      ['top', '30', 'n', '1'],
    ]);
    await baton.redis.del(names.eventStream());
  });

  it('carries an event written through one API process to a follower of another', async () => {
    const onB = await openEvents(apiB, tokens['r']!);
    const sent = await fetch(`${apiA}/v1/handoffs`, {
      method: 'POST',
      headers: { ...auth('s'), 'content-type': 'application/json' },
      body: JSON.stringify({ to: 'r', message: 'through A' }),
    });
    expect(sent.status).toBe(201);
    const id = ((await sent.json()) as { id: string }).id;
    await onB.until((es) => es.some((e) => e.handoffId === id && e.event === 'enrolled'), 'the send through A, on B');
    await onB.close();
  });
});

describe('baton send --wait and baton watch', () => {
  let env: Record<string, string>;

  beforeAll(async () => {
    baton.startWorker();
    expect((await baton.post('/v1/agents', { id: 'doer', provider: 'demo', settings: { thinkMs: 20 } })).status).toBe(201);
    expect((await baton.post('/v1/agents', { id: 'refuser', provider: 'demo', settings: { behavior: 'refuse' } })).status).toBe(201);
    env = { BATON_URL: apiA, BATON_TOKEN: tokens['s']!, BATON_HOME: scratchDir('baton-events-') };
  });

  it('send --wait exits 0 when the demo agent returns the work, and --json prints the final handoff', async () => {
    const done = await cli(env, 'send', 'doer', 'Do it', '--title', 'Waited', '--wait', '--timeout', '60', '--json');
    expect(done.code).toBe(0);
    const h = JSON.parse(done.out);
    expect(h).toMatchObject({ to: 'doer', title: 'Waited', state: 'RETURNED' });
    const plain = await cli(env, 'send', 'doer', 'Do it again', '--wait', '--timeout', '60');
    expect(plain.code).toBe(0);
    expect(plain.out).toMatch(/^RETURNED: /);
    expect(plain.err).toContain('-> RETURNED');
  });

  it('send --wait exits 3 when a refusing agent makes the delivery FAILED', async () => {
    const refused = await cli(env, 'send', 'refuser', 'Do it', '--wait', '--timeout', '60');
    expect(refused.code).toBe(3);
    expect(refused.out).toMatch(/^FAILED: /);
  });

  it('send --wait --timeout exits 7 when nothing settles in time (a manual recipient never answers)', async () => {
    const waited = await cli(env, 'send', 'r', 'Nobody claims this', '--wait', '--timeout', '1');
    expect(waited.code).toBe(7);
  });

  it("watch ID prints the handoff's transitions and ends when it settles", async () => {
    const sent = await baton.post('/v1/handoffs', { to: 'doer', message: 'watch me' }, auth('s'));
    const watched = await cli(env, 'watch', sent.body.id, '--timeout', '60');
    expect(watched.code).toBe(0);
    const lines = watched.out.trim().split('\n');
    expect(lines[0]).toContain('- -> WAITING');
    expect(lines.at(-1)).toContain('-> RETURNED');
    expect(watched.out).not.toMatch(/\u001b\[/);
    // An already settled handoff: its history, then the end, at once.
    const again = await cli(env, 'watch', sent.body.id, '--json');
    expect(again.code).toBe(0);
    expect(
      again.out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).to)
        .at(-1),
    ).toBe('RETURNED');
  });
});
